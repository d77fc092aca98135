"""Runs that survive preemption, killed ranks and a change of size (issue 34), measured.

Trains one small synthetic run four ways with the real trainer under mpirun (``run_local``),
each interruption a real signal to rank 1's process when rank 0 reports a given step, and the
launcher's restart the same command line again (its ``--run-id`` resumes its own checkpoint):

- uninterrupted, 2 ranks (the reference);
- (a) preempted 3 times (SIGTERM to rank 1): steps lost per preemption (goal 0);
- (b) killed -9 twice (rank 1): steps lost per kill (goal <= one checkpoint interval: an epoch);
- (c) resized 2 -> 1 -> 2 ranks (SIGTERM, then the global batch kept by accumulation).

For each: the test accuracy beside the reference's (goals: within 0.005 for (a), (b); 0.01 for
(c)), steps lost, and the seconds from the interruption to the next training step (the restart,
the checkpoint load, the loader and the first step). Prints the CPU first.

    python3 bench/preempt.py --quick     # ~3 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchutil import cpu_label

from lanenb.launch.lines import LogLine
from lanenb.launch.mpirun import launch_env, run_local
from lanenb_trainer.config import TrainConfig


class Launch:
    """One launch of the ranks; sends ``sig`` to its last rank (rank 1 of 2) once rank 0 reports
    step ``at``."""

    def __init__(self, at: int | None = None, sig: signal.Signals = signal.SIGTERM) -> None:
        self.at, self.sig = at, sig
        self.pids: dict[int, int] = {}
        self.events: list = []
        self.sent: float | None = None
        self.first_step: float | None = None

    def on_line(self, line: LogLine) -> None:
        ev = line.event
        if ev is None:
            return
        self.events.append(ev)
        if ev.kind == "start":
            self.pids[ev.rank] = ev["pid"]
        if ev.kind == "step" and ev.rank == 0:
            self.first_step = self.first_step or time.monotonic()
            if self.at is not None and self.sent is None and ev["step"] >= self.at:
                self.sent = time.monotonic()
                os.kill(self.pids[max(self.pids)], self.sig)  # rank 1, or a 1-rank launch's only rank

    def of(self, kind: str) -> list:
        return [e for e in self.events if e.kind == kind and e.rank == 0]


def train(args: list[str], processes: int, at: int | None = None, sig: signal.Signals = signal.SIGTERM) -> Launch:
    launch = Launch(at, sig)
    env = launch_env(extra={"LANENB_THREADS": "1"})
    launch.code = run_local(processes, args, env=env, on_line=launch.on_line, grace=5)  # type: ignore[attr-defined]
    return launch


def scenario(name: str, base: list[str], plan: list[tuple[int, int | None, signal.Signals]]) -> dict:
    """``plan``: (ranks, step to interrupt at or None, signal) per launch, the last to the end."""
    launches: list[Launch] = []
    lost: list[int] = []
    back: list[float] = []
    for processes, at, sig in plan:
        launch = train(base, processes, at, sig)
        previous = launches[-1] if launches else None
        if previous is not None and previous.sent is not None and launch.first_step is not None:
            back.append(launch.first_step - previous.sent)  # the signal to the next step taken
        lost += [e["steps_lost"] for e in launch.of("resumed")]
        launches.append(launch)
    run_dir = Path(base[base.index("--run-dir") + 1])
    metrics = json.loads((run_dir / "metrics.json").read_text())
    end = launches[-1].of("end")
    return {"name": name, "accuracy": metrics["test"]["accuracy"], "steps_lost": lost,
            "checksum": end[0]["param_checksum"] if end else None,
            "back_s": [round(b, 1) for b in back], "codes": [launch.code for launch in launches]}  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer frames and epochs (~3 min on 2 cores)")
    ns = ap.parse_args()
    print(f"CPU: {cpu_label()}")
    from lanenb_trainer.data.synth import synthesize

    frames, epochs = (64, 3) if ns.quick else (160, 6)
    tmp = Path(tempfile.mkdtemp(prefix="lanenb-preempt-"))
    root = tmp / "tusimple"
    synthesize(root, frames, seed=3, width=320, height=180, test_fraction=0.25, progress=False)

    def base(name: str) -> list[str]:
        return TrainConfig(data=str(root), run_dir=str(tmp / name), run_id=f"bench-{name}", epochs=epochs,
                           batch_size=4, img_height=64, img_width=160, lr=0.02, warmup_steps=2, log_every=1,
                           use_val=False, val_fraction=0.0, engine="ddp", timing_every=0,
                           tensorboard=False).validate().to_argv()

    t0 = time.monotonic()
    ref = scenario("uninterrupted", base("ref"), [(2, None, signal.SIGTERM)])
    steps = json.loads((tmp / "ref" / "metrics.json").read_text())["steps"]
    per_epoch = steps // epochs
    cuts = [max(1, steps * i // 4) for i in (1, 2, 3)]
    kills = [per_epoch + per_epoch // 2, 2 * per_epoch + per_epoch // 2]  # mid-epoch, after a checkpoint
    rows = [ref,
            scenario("(a) preempted 3x", base("a"), [(2, c, signal.SIGTERM) for c in cuts]
                     + [(2, None, signal.SIGTERM)]),
            scenario("(b) killed -9 2x", base("b"), [(2, c, signal.SIGKILL) for c in kills]
                     + [(2, None, signal.SIGKILL)]),
            scenario("(c) resized 2->1->2", base("c"), [(2, cuts[0], signal.SIGTERM), (1, cuts[1], signal.SIGTERM),
                                                        (2, None, signal.SIGTERM)])]
    print(f"{frames} synthetic frames, {epochs} epochs, {steps} steps of 8 images ({per_epoch} per epoch: the "
          f"checkpoint interval), 2 ranks, preempted at steps {cuts}, killed at {kills}")
    print(f"{'run':<22}{'test acc':>10}{'diff':>9}  {'weights':<10}{'steps lost':<14}{'back training (s)':<20}"
          "exit codes")
    for r in rows:
        diff = r["accuracy"] - ref["accuracy"]
        same = "identical" if r["checksum"] == ref["checksum"] else "differ"
        print(f"{r['name']:<22}{r['accuracy']:>10.4f}{diff:>+9.4f}  {same:<10}{r['steps_lost']!s:<14}"
              f"{r['back_s']!s:<20}{r['codes']}")
    print(f"total {time.monotonic() - t0:.0f}s; goals: (a) (b) within 0.005, (c) within 0.01; 0 steps lost per "
          f"preemption, <= {per_epoch} per kill")


if __name__ == "__main__":
    main()
