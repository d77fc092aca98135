"""The notebook face under load: is the kernel still free while a 2-rank job trains?

    python bench/notebook_view.py                 # synthetic data, 2 real ranks, ~40 s
    python bench/notebook_view.py --seconds 60 --launches 5

Prints, with the CPU beside them:
- ``%lanetrain`` return time (goal < 0.5 s), over ``--launches`` launches;
- a trivial cell's latency p50/p95 while a 2-rank job trains and its live view runs (goal p95 < 100 ms);
- the view's refresh rate (goal >= 1 Hz) and chart redraws;
- end-to-end event latency, from the trainer's print (the event's ``t``) to the view folding it
  (goal p95 < 1 s locally);
- memory of a view's history (``RunState``) after 100k steps and 1M log lines (bounded, MB);
- the charts' cost per refresh with 100k loss steps and 4 ranks x 10k system samples (rows and
  specs from the reducer, JSON sent to the browser), and the static image a saved notebook keeps;
- with ``--browser``: the browser's frame times while the LiveCharts widget takes 40 updates of
  such a run (Galata + Debian's Chromium, extension/ui-tests/perf; goal: no frame over 50 ms).

Everything runs in-process in a real IPython shell with the extension loaded (what a kernel
runs), against real mpirun ranks, in a throwaway LANENB_HOME.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from benchutil import cpu_name, percentile


def history_memory_mb(steps: int = 100_000, lines: int = 1_000_000) -> tuple[float, int, int]:
    from lanenb.analysis.runstate import RunState
    from lanenb.contract.backend import LogLine
    from lanenb_trainer.events import Event

    tracemalloc.start()
    state = RunState()
    for i in range(1, steps + 1):
        state.fold(Event("step", 0, float(i), data={"step": i, "epoch": i // 1000, "total_steps": 10**7,
                                                    "loss": 1.0 / i, "lr": 0.01, "images_per_s": 50.0}))
        if i % 10 == 0:
            for r in range(4):
                state.fold(Event("system", r, float(i), data={"cpu_percent": 90.0, "rss_mb": 400.0}))
    line = LogLine(0, "some plain log output of a rank, about sixty characters long")
    for _ in range(lines):
        state.fold_line(line)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return current / 2**20, len(state.series["loss"]), len(state.logs)


def long_run_state(steps: int = 100_000, ranks: int = 4):
    """A run's reducer after ``steps`` steps, ``ranks`` ranks sampled every 10 steps, 10 epochs."""
    import math

    from lanenb.analysis.runstate import RunState
    from lanenb_trainer.events import Event

    state = RunState()
    for i in range(1, steps + 1):
        state.fold(Event("step", 0, float(i), data={"step": i, "epoch": i * 10 // steps, "total_steps": steps,
                                                    "loss": 2 * math.exp(-i / (steps / 3)) + 0.05 * math.sin(i),
                                                    "lr": 0.01, "images_per_s": 50.0 + i % 7}))
        if i % 10 == 0:
            for r in range(ranks):
                state.fold(Event("system", r, float(i), data={"cpu_percent": 90.0, "rss_mb": 400.0,
                                                              "gpu_util": 60.0 + (i * (r + 1)) % 30,
                                                              "gpu_mem_mb": 9000.0 + r}))
    for e in range(10):
        state.fold(Event("epoch", 0, float(e), data={"epoch": e, "val_accuracy": 0.8 + e / 60, "val_fp": 0.1,
                                                     "val_fn": 0.08}))
    state.fold(Event("eval", 0, 1.0, data={"split": "test", "model": "best", "epoch": 8, "accuracy": 0.95}))
    return state


def chart_costs() -> dict[str, float]:
    """Kernel-side cost of one chart refresh of a long run, and the static image's size and time."""
    import json

    from lanenb.analysis.chartdata import STATIC_LIMIT, run_png, run_rows, run_specs

    state = long_run_state()
    times = []
    for _ in range(20):
        t = time.perf_counter()
        rows, specs = run_rows(state), run_specs(state)
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    png = run_png(run_specs(state), run_rows(state, STATIC_LIMIT), title="a 10-epoch run")
    png_s = time.perf_counter() - t
    return {"refresh_ms": statistics.median(times) * 1000, "rows": sum(len(v) for v in rows.values()),
            "json_kb": len(json.dumps(rows)) / 1000, "specs_kb": len(json.dumps(specs)) / 1000,
            "png_kb": len(png) / 1000, "png_s": png_s}


def browser_frames(tmp: Path) -> dict | None:
    """Run extension/ui-tests/perf in JupyterLab + Chromium; None when either is missing."""
    import shutil
    import socket
    import subprocess

    chromium = os.environ.get("LANENB_CHROMIUM", "/usr/bin/chromium")
    ext = Path(__file__).resolve().parents[1] / "extension"
    if not Path(chromium).exists() or shutil.which("jlpm") is None:
        print("browser frames: skipped (needs /usr/bin/chromium and jlpm: scripts/setup.sh)")
        return None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp / "artifacts"
    root = tmp / "root"
    out.mkdir()
    root.mkdir()
    env = dict(os.environ, LANENB_UI_PORT=str(port), LANENB_ARTIFACTS=str(out), JUPYTERLAB_GALATA_ROOT_DIR=str(root),
               LANENB_CHROMIUM=chromium, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1", CI="1")
    done = subprocess.run(["jlpm", "playwright", "test", "--config", "ui-tests/playwright.perf.config.js"],
                          cwd=ext, env=env, capture_output=True, text=True, timeout=900, check=False)
    result = out / "notebook-view-perf.json"
    if done.returncode != 0 or not result.exists():
        print("browser frames: the perf run failed:\n" + done.stdout[-3000:])
        return None
    import json

    return json.loads(result.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="how long to probe cells while the job trains")
    ap.add_argument("--launches", type=int, default=3, help="%%lanetrain launches timed")
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--browser", action="store_true",
                    help="also measure frame times in JupyterLab + Chromium (about 2 min)")
    ap.add_argument("--charts-only", action="store_true", help="only the chart figures (no training job)")
    args = ap.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    tmp = Path(tempfile.mkdtemp(prefix="lanenb-bench-nb-"))
    os.environ["LANENB_HOME"] = str(tmp / "home")
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores), Python {platform.python_version()}")
    costs = chart_costs()
    print(f"charts of a 100k-step run, 4 ranks x 10k samples: refresh {costs['refresh_ms']:.1f} ms in the kernel, "
          f"{costs['rows']:.0f} rows = {costs['json_kb']:.0f} kB JSON per update (specs {costs['specs_kb']:.0f} kB, "
          f"sent when the panels change)")
    print(f"static image for the saved notebook: {costs['png_kb']:.0f} kB PNG, drawn in {costs['png_s']:.1f} s "
          f"in its own process (once, at the end)")
    if args.browser:
        frames = browser_frames(tmp)
        if frames:
            b, k = frames["browser"], frames["kernel"]
            print(f"browser, LiveCharts over 40 updates: {b['frames']} frames, p50 {b['frame_ms_p50']:.1f} ms, "
                  f"p95 {b['frame_ms_p95']:.1f} ms, max {b['frame_ms_max']:.1f} ms, {b['frames_over_50ms']} over "
                  f"50 ms, {b['long_tasks']} long tasks (max {b['long_task_ms_max']:.0f} ms) (goal: none over 50 ms)")
            print(f"kernel side of those updates: p50 {k['update_ms_p50']:.1f} ms, max {k['update_ms_max']:.1f} ms, "
                  f"{k['bytes_per_update'] / 1000:.0f} kB each")
            for panel, run in sorted((b.get("chart_runs") or {}).items()):
                print(f"  chart {panel:11s} {run['runs']:3d} runs: p50 {run['ms_p50']:.1f} ms, "
                      f"max {run['ms_max']:.1f} ms")
    if args.charts_only:
        return 0
    from lanenb_trainer.data.synth import synthesize

    data = tmp / "data"
    synthesize(data, args.frames, seed=0, width=640, height=360, test_fraction=0.2, progress=False)

    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    t = time.perf_counter()
    ip.run_line_magic("load_ext", "lanenb")
    load_s = time.perf_counter() - t
    from lanenb.notebook import view as view_module

    flags = (f"--data {data} --processes 2 --batch-size 2 --epochs 50 --engine ddp --img-height 128 "
             "--img-width 320 --log-every 1 --system-interval 1")
    returns = []
    jobs = []
    for _ in range(args.launches):
        t = time.perf_counter()
        jobs.append(ip.run_line_magic("lanetrain", flags))
        returns.append(time.perf_counter() - t)
    for job in jobs[:-1]:
        job.cancel()
    job = jobs[-1]
    view = view_module._VIEWS[job.name]

    # end-to-end latency: when the view folds an event, compare with the event's own time stamp
    latencies: list[float] = []
    fold = view.state.fold

    def timed_fold(ev):
        latencies.append(time.time() - ev.t)
        fold(ev)

    view.state.fold = timed_fold  # type: ignore[method-assign]
    while view.state.step == 0 and not view.final:  # wait for training to start (torch import)
        time.sleep(0.2)
    latencies.clear()
    refreshes0, t0 = view.refreshes, time.monotonic()
    cells = []
    while time.monotonic() - t0 < args.seconds and not view.final:
        t = time.perf_counter()
        ip.run_cell("x = 1 + 1", store_history=False, silent=True)
        cells.append(time.perf_counter() - t)
        time.sleep(0.05)
    elapsed = time.monotonic() - t0
    refresh_hz = (view.refreshes - refreshes0) / elapsed
    steps = view.state.step
    job.cancel()
    mem_mb, buckets, kept = history_memory_mb()

    print(f"%load_ext lanenb: {load_s * 1000:.0f} ms (imports ipywidgets + matplotlib once)")
    print(f"%lanetrain return: median {statistics.median(returns) * 1000:.0f} ms, max {max(returns) * 1000:.0f} ms "
          f"over {len(returns)} launches (goal < 500 ms)")
    print(f"trivial cell while 2 ranks train ({len(cells)} cells over {elapsed:.0f} s, {steps} steps seen): "
          f"p50 {percentile(cells, 0.5) * 1000:.2f} ms, p95 {percentile(cells, 0.95) * 1000:.2f} ms, "
          f"max {max(cells) * 1000:.1f} ms (goal p95 < 100 ms)")
    print(f"view refresh: {refresh_hz:.2f} Hz (goal >= 1 Hz)")
    if latencies:
        print(f"event latency trainer print -> view: p50 {percentile(latencies, 0.5) * 1000:.0f} ms, "
              f"p95 {percentile(latencies, 0.95) * 1000:.0f} ms over {len(latencies)} events (goal p95 < 1 s)")
    print(f"view history after 100k steps + 1M log lines: {mem_mb:.2f} MB "
          f"({buckets} loss buckets, {kept} log lines kept)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
