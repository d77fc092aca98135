"""Multi-host figures on simulated hosts (tests/multihost/cluster_support: one network namespace per
MPIJob pod, sshd, the MPIJob's own launcher command): weak-scaling efficiency at 1, 2 and 4 ranks
(one per host) for both engines, and the step time with the links shaped by tc (1 Gbit/s 1 ms vs
10 Gbit/s 0.1 ms; the delay only where the kernel has sch_netem, printed either way).

    sudo python bench/multihost.py [--steps 8]

All "hosts" share this machine's cores, so the figures measure the software path (ssh start-up,
rendezvous, gradient exchange over veths), not a real network's capacity. Root only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "multihost"))
sys.path.insert(0, str(REPO / "bench"))

# found through the sys.path entries above (the test helpers are not a package)
from benchutil import cpu_name  # noqa: E402
from cluster_support import cleanup_leftovers, prepare_machine, unavailable  # noqa: E402
from multihost_support import cluster_for, make_spec  # noqa: E402

from lanenb_trainer.progress import progress_bar  # noqa: E402


def run(volume: Path, work: Path, engine: str, ranks: int, steps: int, link: tuple[str, float] | None = None):
    spec = make_spec(volume, engine, ranks, 1, run=work.name, max_steps=steps, epochs=50)
    cluster = cluster_for(spec, work)
    applied = "unshaped"
    try:
        cluster.start()
        if link:
            applied = cluster.shape(*link)
        code = cluster.run_launcher(600)
    finally:
        cluster.close()
    if code != 0:
        raise RuntimeError(cluster.output())
    steps_ev = [e for e in cluster.events("step", rank=0) if e["step"] > 2]  # after warm-up
    return statistics.median(e["step_time_s"] for e in steps_ev), applied


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    why = unavailable()
    if why:
        print(f"cannot simulate hosts here: {why}")
        return 1
    from lanenb_trainer.data.synth import synthesize
    from lanenb_trainer.engines import horovod_available

    cleanup_leftovers()
    prepare_machine()
    root = Path(tempfile.mkdtemp(prefix="lanenb-mh-bench-"))
    synthesize(root / "tusimple", 96, seed=3, width=320, height=180, test_fraction=0.1, progress=False)
    engines = ["ddp"] + (["horovod"] if horovod_available() else [])
    print(f"CPU: {cpu_name()}; batch 2 per rank, 64x160 frames, median step time after warm-up")
    jobs = [(e, n) for e in engines for n in (1, 2, 4)]
    times: dict[tuple[str, int], float] = {}
    for i, (engine, n) in enumerate(progress_bar(jobs, desc="weak scaling", unit="run")):
        times[engine, n], _ = run(root, root / f"ws{i}", engine, n, args.steps)
    print("\nweak scaling (1 rank per simulated host; efficiency = t(1) / t(n))")
    for engine in engines:
        row = "  ".join(f"{n} ranks {times[engine, n] * 1000:7.1f} ms/step "
                        f"eff {times[engine, 1] / times[engine, n]:5.2f}" for n in (1, 2, 4))
        print(f"  {engine:8s} {row}")
    print("\nlinks shaped with tc (2 hosts); exchange time ~ step time minus the 1-rank step time")
    links = [("1gbit", 1.0), ("10gbit", 0.1)]
    for engine in engines:
        for j, link in enumerate(links):
            t, applied = run(root, root / f"tc{engine}{j}", engine, 2, args.steps, link)
            exchange = (t - times[engine, 1]) * 1000
            print(f"  {engine:8s} {applied:55s} {t * 1000:7.1f} ms/step, exchange ~{exchange:6.1f} ms")
    cleanup_leftovers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
