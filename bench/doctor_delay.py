"""The run doctor's delay: seconds from a fault's start to the first verdict that names it.

    python bench/doctor_delay.py                         # input + straggler (+ exchange as root)
    python bench/doctor_delay.py --repeats 5 --faults input,straggler

Each fault is the one tests/doctor injects (tests/doctor/doctor_support.py), on a real 2-rank
CPU job of the small model on 64x160 synthetic frames, switched on from outside the run once
every rank has sent two ``timing`` windows:

- input: every frame read sleeps 0.1 s (a sitecustomize on the ranks' PYTHONPATH, a flag file);
- straggler: rank 1 stopped 50 ms of every 100 ms (SIGSTOP/SIGCONT, a CPU quota's effect);
- exchange: 2 simulated hosts (tests/multihost: network namespaces, sshd), every link limited
  to 50 Mbit/s by tc htb; root only, skipped (and said so) elsewhere.

The delay is measured as a view sees it: ``Job.poll`` every 0.2 s folded into a ``RunState``,
``diagnose`` after each poll. Goal: under 30 s. What sets it: the ``--timing-every`` window
(10 steps by default) and the doctor's "2 of the last 3 windows" rule. Everything runs in a
throwaway LANENB_HOME.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "doctor"))
sys.path.insert(0, str(REPO / "tests" / "multihost"))
sys.path.insert(0, str(REPO / "bench"))

# found through the sys.path entries above (the test helpers are not a package)
from benchutil import cpu_name  # noqa: E402
from doctor_support import VERDICT_DEADLINE_S, FaultOutcome, input_bound_run, make_dataset, straggler_run  # noqa: E402

FAULTS = ("input", "straggler", "exchange")


def _local(run: Callable[..., tuple[FaultOutcome, object]]) -> Callable[[Path, Path], tuple[FaultOutcome, str]]:
    def go(data: Path, work: Path) -> tuple[FaultOutcome, str]:
        outcome, _job = run(data, work)
        return outcome, ""

    return go


def _exchange(volume: Path, work: Path) -> tuple[FaultOutcome, str]:
    from doctor_cluster import exchange_bound_run

    outcome, applied, _left = exchange_bound_run(volume, work)
    return outcome, applied


def exchange_unavailable() -> str | None:
    from cluster_support import unavailable

    return unavailable()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per fault (default 3)")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of {', '.join(FAULTS)}")
    args = parser.parse_args(argv)
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        parser.error(f"unknown faults {unknown}; choose from {FAULTS}")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    root = Path(tempfile.mkdtemp(prefix="lanenb-doctor-bench-"))
    os.environ["LANENB_HOME"] = str(root / "home")
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores); 2 ranks, ddp, small model, 64x160 frames, batch 2 per rank;"
          f" delay = fault switched on -> first verdict naming it (goal < {VERDICT_DEADLINE_S:g} s)")
    runs: dict[str, Callable[[Path, Path], tuple[FaultOutcome, str]]] = {
        "input": _local(input_bound_run), "straggler": _local(straggler_run), "exchange": _exchange}
    failed = False
    for fault in faults:
        if fault == "exchange":
            why = exchange_unavailable()
            if why:
                print(f"  {fault:10s} skipped: cannot simulate hosts here ({why})")
                continue
            from cluster_support import cleanup_leftovers, prepare_machine

            cleanup_leftovers()
            prepare_machine()
            data = root / "pvc"  # the shared "PVC" the simulated hosts mount: <volume>/tusimple
            if not data.exists():
                make_dataset(data, 40)
        else:
            data = root / "data" / "tusimple"
            if not data.exists():
                make_dataset(data.parent)
        delays: list[float] = []
        verdict = ""
        for i in range(args.repeats):
            outcome, applied = runs[fault](data, root / f"{fault}-{i}")
            if outcome.delay_s is None or outcome.hit is None:
                failed = True
                print(f"  {fault:10s} run {i + 1}: no verdict within {VERDICT_DEADLINE_S:g} s {applied}\n"
                      f"{outcome.explain()}")
                continue
            delays.append(outcome.delay_s)
            verdict = str(outcome.hit.verdict)
        if delays:
            print(f"  {fault:10s} delay median {statistics.median(delays):5.1f} s, max {max(delays):5.1f} s "
                  f"over {len(delays)}/{args.repeats} runs; e.g. \"{verdict}\"")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
