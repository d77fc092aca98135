"""The notebook face under load: is the kernel still free while a 2-rank job trains?

    python bench/notebook_view.py                 # synthetic data, 2 real ranks, ~40 s
    python bench/notebook_view.py --seconds 60 --launches 5

Prints, with the CPU beside them:
- ``%lanetrain`` return time (goal < 0.5 s), over ``--launches`` launches;
- a trivial cell's latency p50/p95 while a 2-rank job trains and its live view runs (goal p95 < 100 ms);
- the view's refresh rate (goal >= 1 Hz) and chart redraws;
- end-to-end event latency, from the trainer's print (the event's ``t``) to the view folding it
  (goal p95 < 1 s locally);
- memory of a view's history (``RunState``) after 100k steps and 1M log lines (bounded, MB).

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="how long to probe cells while the job trains")
    ap.add_argument("--launches", type=int, default=3, help="%%lanetrain launches timed")
    ap.add_argument("--frames", type=int, default=120)
    args = ap.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    tmp = Path(tempfile.mkdtemp(prefix="lanenb-bench-nb-"))
    os.environ["LANENB_HOME"] = str(tmp / "home")
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

    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores), Python {platform.python_version()}")
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
