"""Sweeps: does pruning save epochs without losing the winner, and what does the driver cost?

    python bench/sweep.py                      # 16 + 16 trials, 2 CPU ranks each (~30 min on 2 cores)
    python bench/sweep.py --trials 6 --epochs 3 --skip-cell   # a quick look (~6 min)

On synthetic 200-frame data (640x360, the quickstart's), in a throwaway LANENB_HOME, real
mpirun ranks:
1. a TPE sweep over lr, warm-up and batch size with the ASHA pruner, and the same sweep (same
   sampler seed) without pruning. Goal: the same best validation accuracy (within 0.01) for at
   least 40% fewer trained epochs;
2. the best trial's test accuracy (its ``metrics.json`` headline) beside the quickstart recipe's
   (lr 0.02, warm-up 10) trained at the same size and epochs. Goal: at or above;
3. the driver's overhead per trial: from one trial settling to the next trial's job submitted
   (parallel 1; the driver polls every ``POLL_S``). Goal < 1 s;
4. a trivial cell's latency in a real IPython shell with the extension loaded while a
   ``%lanesweep --parallel 2`` runs two trials. Goal p95 < 100 ms.
Figures are printed with the CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchutil import cpu_label, percentile


def job_flags(args: argparse.Namespace, data: Path, processes: int) -> list[str]:
    return ["--data", str(data), "--processes", str(processes), "--epochs", str(args.epochs),
            "--img-height", str(args.height), "--img-width", str(args.width), "--engine", "ddp"]


def run_sweep(args: argparse.Namespace, data: Path, name: str, pruner: str) -> dict:
    """One sweep to its end; its best value, trained epochs and the gaps between trials."""
    from lanenb.commands.sweep_args import sweep_from_argv
    from lanenb.jobs import get_job

    argv = [*job_flags(args, data, args.processes), "--name", name, "--lr", "1e-3..1e-1:log",
            "--warmup-steps", "0..40:int", "--batch-size", "2,4,8", "--trials", str(args.trials),
            "--pruner", pruner, "--sampler-seed", str(args.seed)]
    t0 = time.monotonic()
    sweep = sweep_from_argv(argv)
    state = sweep.wait(poll=2.0)
    wall = time.monotonic() - t0
    rows = sweep.trials()
    frozen = {t.number: t for t in sweep._study.get_trials(deepcopy=False)}
    gaps = []
    for row in rows[1:]:
        before = frozen[row.number - 1].datetime_complete
        job = get_job(row.job) if row.job else None
        if before is not None and job is not None and job.created is not None:
            gaps.append(job.created - before.timestamp())
    return {"sweep": sweep, "state": state, "wall": wall, "best": sweep.best,
            "epochs": sum(r.epochs for r in rows), "pruned": sum(r.state == "pruned" for r in rows),
            "failed": sum(r.state == "failed" for r in rows), "gaps": gaps}


def test_accuracy(job_name: str) -> float | None:
    from lanenb.jobs import get_job

    metrics = get_job(job_name).metrics or {}
    headline = metrics.get("headline") or {}
    return headline.get("accuracy")


def recipe_accuracy(args: argparse.Namespace, data: Path) -> float | None:
    """The quickstart's recipe (lr 0.02, warm-up 10, batch 4) at the sweep's size and epochs."""
    from lanenb.commands.arguments import add_job_arguments, spec_from_args
    from lanenb.jobs import submit

    parser = add_job_arguments(argparse.ArgumentParser())
    ns = parser.parse_args([*job_flags(args, data, args.processes), "--batch-size", "4", "--name", "recipe",
                            "--lr", "0.02", "--warmup-steps", "10"])
    spec = spec_from_args(ns, parser)
    job = submit(spec)
    job.wait()
    return test_accuracy(job.name)


def cell_latency(args: argparse.Namespace, data: Path) -> tuple[list[float], int]:
    """Trivial cells in a real IPython shell while ``%lanesweep --parallel 2`` trains two trials."""
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_line_magic("load_ext", "lanenb")
    flags = " ".join([*job_flags(args, data, 1), "--name", "cells", "--lr", "1e-3..1e-1:log", "--trials", "4",
                      "--parallel", "2", "--pruner", "none", "--epochs", "50"])
    sweep = ip.run_line_magic("lanesweep", flags)
    deadline = time.monotonic() + 120
    while sum(r.state == "running" for r in sweep.trials()) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(5)  # both trials past their imports, training
    running = sum(r.state == "running" for r in sweep.trials())
    cells = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < args.cell_seconds:
        t = time.perf_counter()
        ip.run_cell("x = 1 + 1", store_history=False, silent=True)
        cells.append(time.perf_counter() - t)
        time.sleep(0.05)
    sweep.stop()
    return cells, running


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--processes", type=int, default=2, help="ranks per trial")
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--height", type=int, default=128)
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--seed", type=int, default=0, help="the sampler's seed (both sweeps)")
    ap.add_argument("--cell-seconds", type=float, default=20)
    ap.add_argument("--skip-cell", action="store_true", help="leave out the cell-latency part")
    ap.add_argument("--pruners", default="asha,none",
                    help="the sweeps to run (comma-separated: asha, median, none); the comparison needs asha and none")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="lanenb-bench-sweep-"))
    os.environ["LANENB_HOME"] = str(tmp / "home")
    from lanenb_trainer.data.synth import synthesize

    data = tmp / "data"
    synthesize(data, args.frames, seed=0, width=640, height=360, test_fraction=0.2, progress=False)
    print(f"CPU: {cpu_label()}, {os.cpu_count()} cores")
    print(f"{args.trials} trials x {args.processes} ranks, {args.epochs} epochs, {args.height}x{args.width}, "
          f"{args.frames} frames; space lr 1e-3..1e-1:log, warmup 0..40, batch 2,4,8; TPE seed {args.seed}")

    pruners = [p.strip() for p in args.pruners.split(",") if p.strip()]
    unknown = sorted(set(pruners) - {"asha", "median", "none"})
    if unknown:
        ap.error(f"--pruners {args.pruners!r}: {unknown[0]!r} is not asha, median or none")
    runs = {p: run_sweep(args, data, f"bench-{p}", p) for p in pruners}
    for pruner, r in runs.items():
        best = r["best"] or {}
        print(f"{pruner:>5}: {r['state']} in {r['wall'] / 60:.1f} min, {r['epochs']} epochs trained, "
              f"{r['pruned']} pruned, {r['failed']} failed; best val acc {best.get('value', float('nan')):.4f} "
              f"(trial {best.get('number')}, {best.get('params')})")
    a, n = runs.get("asha") or {}, runs.get("none") or {}
    if a.get("best") and n.get("best"):
        saved = 1 - a["epochs"] / n["epochs"]
        print(f"ASHA vs none: best val acc {a['best']['value'] - n['best']['value']:+.4f} (goal within 0.01), "
              f"{saved * 100:.0f}% fewer epochs (goal >= 40%)")
    gaps = [g for r in runs.values() for g in r["gaps"]]
    if gaps:
        print(f"driver overhead per trial (trial settled -> next job submitted): median "
              f"{statistics.median(gaps) * 1000:.0f} ms, max {max(gaps) * 1000:.0f} ms over {len(gaps)} "
              f"(goal < 1 s)")
    recipe = recipe_accuracy(args, data)
    best_job = (a.get("best") or {}).get("job")
    best_test = test_accuracy(best_job) if best_job else None
    print(f"test accuracy: best ASHA trial {best_job} {best_test}, quickstart recipe {recipe} (goal: at or above)")
    if not args.skip_cell:
        cells, running = cell_latency(args, data)
        print(f"trivial cell while {running} trials train ({len(cells)} cells): p50 "
              f"{percentile(cells, 0.5) * 1000:.2f} ms, p95 {percentile(cells, 0.95) * 1000:.2f} ms, "
              f"max {max(cells) * 1000:.1f} ms (goal p95 < 100 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
