"""What the azureml backend costs on this side of the network (no Azure service is reached).

    python bench/azureml_overhead.py [--rounds 5]

Figures printed:
- the SDK's import (``azure.ai.ml``, paid once per kernel, on the first azureml call only) and
  the import of lanenb's backend module without it (in fresh interpreters),
- ``--dry-run``'s job build + YAML (``render``), after the first one,
- the client side of one recorded submit -> 4 polls -> cancel cycle through the Job API: the
  SDK's pipelines, lanenb's log cursor and parsing, the registry; HTTP answered from memory
  (``tests/azureml/recordings/submit_stream_cancel.json``), so this is the floor under the
  network's round trips.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from azureml_replay import WORKSPACE, FakeCredential, ReplayAdapter, transport  # noqa: E402
from benchutil import cpu_name  # noqa: E402


def import_seconds(statement: str) -> float:
    """Wall time of ``statement`` in a fresh interpreter (the import cost a new kernel pays)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "trainer")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def spec(name: str):  # type: ignore[no-untyped-def]
    from lanenb.contract.spec import TrainSpec

    return TrainSpec(dataset="azureml:tusimple:1", backend="azureml", name=name, processes=4, batch_size=4,
                     max_steps=20, azureml=dict(compute="gpu-cluster", instance_count=2, shm_size="16g",
                                                environment="lanenb-trainer:3", **WORKSPACE))


def cycle() -> float:
    from lanenb.jobs import submit
    from lanenb.registry.jobs import JobRegistry

    http = ReplayAdapter("submit_stream_cancel.json")
    with tempfile.TemporaryDirectory() as home:
        registry = JobRegistry(Path(home) / "jobs.sqlite3")
        t0 = time.perf_counter()
        job = submit(spec("lane-az-1"), registry=registry, credential=FakeCredential(), transport=transport(http))
        cursor = None
        for _ in range(3):
            cursor = job.poll(cursor).cursor
        job.cancel()
        job.poll(cursor)
        elapsed = time.perf_counter() - t0
    http.assert_done()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="repeats of each timing (default 5)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    print(f"CPU: {cpu_name()}  ({os.cpu_count()} cores visible)")
    sdk = [import_seconds("import azure.ai.ml") for _ in range(args.rounds)]
    own = [import_seconds("import lanenb.backends.azureml, sys; assert 'azure.ai.ml' not in sys.modules")
           for _ in range(args.rounds)]
    print(f"import azure.ai.ml (fresh interpreter)          median {statistics.median(sdk):6.2f} s  "
          f"min {min(sdk):6.2f} s")
    print(f"import lanenb.backends.azureml (no SDK loaded)  median {statistics.median(own):6.2f} s  "
          f"min {min(own):6.2f} s")

    from lanenb.backends.azureml.command_job import render

    render(spec("lane-az-warm"))
    renders = []
    for i in range(args.rounds * 4):
        t0 = time.perf_counter()
        render(spec(f"lane-az-r{i}"))
        renders.append(time.perf_counter() - t0)
    print(f"--dry-run job build + YAML                      median {statistics.median(renders) * 1000:6.1f} ms")

    cycle()  # the first one builds the SDK's clients and schemas
    cycles = [cycle() for _ in range(args.rounds)]
    requests = len(ReplayAdapter("submit_stream_cancel.json").pending)
    print(f"submit + 3 polls + cancel + poll, replayed HTTP median {statistics.median(cycles) * 1000:6.1f} ms "
          f"({requests} requests: {statistics.median(cycles) / requests * 1000:.1f} ms each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
