"""The cost of the TensorBoard files that every run writes by default (``--no-tensorboard`` to skip).

Two figures, as in ``bench/step_timing.py``, because the second is far below the noise of the first:

1. end to end: the same short 2-rank run (``small`` backbone, synthetic frames, ``ddp``,
   ``--log-every 1``: a ``step`` event, so six scalars, on every step, the worst case) with
   ``--tensorboard`` and ``--no-tensorboard`` in interleaved rounds; per run the median
   ``step_time_s`` of rank 0's ``step`` events after a warm-up, the overhead as the median of
   the rounds' paired ratios, printed with their spread (what this measure resolves);
2. in-process: the time one ``step`` event takes through the rank's ``EventLog`` (stdout to
   /dev/null) with the TensorBoard listener writing real files, against the same event without
   it, in microseconds, and as a share of the run's step time.

    python bench/tensorboard_overhead.py                 # 2 ranks, 4 rounds, 30 steps per run
    python bench/tensorboard_overhead.py --rounds 2 --steps 20
    python bench/tensorboard_overhead.py --rounds 0        # only the in-process figures (seconds)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import add_run_arguments, cpu_name, paired_overhead


def run_once(args: argparse.Namespace, data: Path, run_dir: Path, tensorboard: bool) -> float:
    """Median step time (s) of rank 0 after ``--warmup`` steps, for one run."""
    from lanenb.launch.mpirun import launch_env, run_local
    from lanenb_trainer.config import TrainConfig
    from lanenb_trainer.tensorboard_log import tensorboard_dir

    cfg = TrainConfig(data=str(data), run_dir=str(run_dir), engine="ddp", backbone="small",
                      img_height=args.height, img_width=args.width, batch_size=args.batch_size,
                      epochs=100, max_steps=args.steps, use_val=False, log_every=1, warmup_steps=2,
                      tensorboard=tensorboard)
    lines: list = []
    code = run_local(args.ranks, cfg.validate().to_argv(),
                     env=launch_env(extra={"LANENB_THREADS": str(args.threads)}), on_line=lines.append, grace=10)
    steps = [ln.event for ln in lines if ln.event is not None and ln.event.kind == "step" and ln.event.rank == 0]
    if code != 0 or len(steps) < args.steps:
        tail = "\n".join(ln.tagged() for ln in lines[-30:])
        raise SystemExit(f"run with tensorboard={tensorboard} failed (exit {code}):\n{tail}")
    if tensorboard != tensorboard_dir(run_dir).is_dir():
        raise SystemExit(f"tensorboard={tensorboard} but {tensorboard_dir(run_dir)} exists={not tensorboard}")
    return statistics.median(e["step_time_s"] for e in steps[args.warmup:])


def per_event_cost(n: int, workdir: Path) -> tuple[float, float, float]:
    """(µs per ``step`` event on the emitting thread with the TensorBoard listener, µs without;
    best of 5 batches of ``n`` paced events), and the process CPU µs per event with the listener, all threads counted
    (the sink's thread and tensorboardX's writer thread work off the training thread, but on a
    busy rank their CPU time is still taken from somewhere)."""
    from lanenb_trainer.events import EventLog
    from lanenb_trainer.tensorboard_log import TensorBoardSink

    fields = dict(epoch=0, epoch_step=1, steps_per_epoch=100, total_steps=1000, loss=0.41, seg_loss=0.37,
                  exist_loss=0.04, lr=0.01, images_per_s=120.5, step_time_s=0.066)

    def best_of(log: EventLog) -> float:
        """Events paced as a rank emits them (a step between two: here a 1 ms sleep, which lets
        other threads run as torch's kernels do), only the calls timed."""
        best = float("inf")
        step = 0
        for _ in range(5):
            spent = 0.0
            for _ in range(n):
                step += 1
                t = time.perf_counter()
                log("step", step=step, **fields)
                spent += time.perf_counter() - t
                time.sleep(0.001)
            best = min(best, spent / n)
        return best * 1e6

    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        plain = EventLog(0)
        off = best_of(plain)
        cpu0 = time.process_time()
        plain_cpu = best_of(plain)
        plain_cpu = (time.process_time() - cpu0) / (5 * n) * 1e6
        with_tb = EventLog(0)
        sink = TensorBoardSink(workdir / "run", 0, primary=True)
        with_tb.add_listener(sink)
        cpu0 = time.process_time()
        on = best_of(with_tb)
        with_tb.close()  # the writer thread drains its queue: the files hold every point
        cpu = (time.process_time() - cpu0) / (5 * n) * 1e6 - plain_cpu
    return on, off, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(ap, rounds=4, steps=30)
    ap.add_argument("--events", type=int, default=1000, help="step events of the in-process measure")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    from lanenb_trainer.data.synth import synthesize

    print(f"CPU: {cpu_name()}  ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})  "
          f"{args.ranks} rank(s) ddp, small backbone {args.height}x{args.width}, batch {args.batch_size}, "
          f"a step event every step")
    results: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="lanenb-tbbench-") as tmp:
        data = Path(tmp) / "synth"
        synthesize(data, 48, seed=1, width=640, height=360, test_fraction=0.0, progress=False)
        on_us, off_us, cpu_us = per_event_cost(args.events, Path(tmp))
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for tb in order:
                results[tb].append(run_once(args, data, Path(tmp) / f"run-{r}-{tb}", tb))
            print(f"  round {r + 1}: step {results[True][-1] * 1e3:.2f} ms with TensorBoard, "
                  f"{results[False][-1] * 1e3:.2f} ms without")
    print(f"per step event, in-process: {on_us:.1f} µs on the emitting thread with the TensorBoard listener vs "
          f"{off_us:.1f} µs without (+{on_us - off_us:.1f} µs); CPU of all threads +{cpu_us:.0f} µs per event "
          f"(six scalars built and written off the training thread)")
    if not args.rounds:
        return 0
    on_med, off_med, over, spread = paired_overhead(results[True], results[False])
    print(f"end to end, step time: --tensorboard median {on_med * 1e3:.2f} ms, --no-tensorboard median "
          f"{off_med * 1e3:.2f} ms")
    print(f"  overhead {over:+.2f}% (median of the rounds' paired ratios; the rounds spread +-{spread:.2f}%)"
          "   goal < 1%")
    added = on_us - off_us
    share = added * 1e-6 / off_med * 100
    print(f"  -> {added:.1f} µs added per step event on the training thread = {share:.4f}% of a "
          f"{off_med * 1e3:.1f} ms step; all threads {cpu_us * 1e-6 / off_med * 100:.3f}%   goal < 1%")
    ok = share < 1.0 and over < max(1.0, spread)
    print(json.dumps({"cpu": cpu_name(), "ranks": args.ranks, "step_s_tensorboard": results[True],
                      "step_s_off": results[False], "overhead_pct": round(over, 3), "spread_pct": round(spread, 3),
                      "event_us_tensorboard": round(on_us, 2), "event_us_off": round(off_us, 2),
                      "event_cpu_us_all_threads": round(cpu_us, 1),
                      "per_step_pct": round(share, 4), "goal_met": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
