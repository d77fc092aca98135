"""Fixtures for the jobs tests: an isolated LANENB_HOME and a tiny real MPI program.

The tiny program runs under the real mpirun through the real supervisor, so the job
mechanics (detach, logs, cancel, re-attach) are tested without waiting for torch.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from homes import lanenb_home  # noqa: F401  (autouse: every test gets its own LANENB_HOME)

RANK_PROGRAM = textwrap.dedent(
    """
    import json, os, signal, sys, time
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    steps, delay, pid_dir = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else "ok"
    if mode == "stubborn" and rank == 1:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # forces cancel to escalate to SIGKILL
    if mode == "slowstop":  # rank 0 needs a moment to stop (a last checkpoint write), rank 1 none
        def stop(signum, frame):
            print(f"rank {rank} got signal {signum}", flush=True)
            time.sleep(2.0 if rank == 0 else 0.0)
            print("@lanenb " + json.dumps({"v": 1, "t": time.time(), "rank": rank, "kind": "end",
                                           "status": "cancelled"}), flush=True)
            os._exit(130)
        signal.signal(signal.SIGTERM, stop)
    with open(os.path.join(pid_dir, f"rank{rank}.pid"), "w") as fh:
        fh.write(str(os.getpid()))
    print(f"hello from rank {rank} env={os.environ.get('LANE_TEST', '')} "
          f"token={'set' if os.environ.get('HF_TOKEN') == 'hf_do_not_store_me' else 'missing'}", flush=True)
    for i in range(steps):
        print("@lanenb " + json.dumps({"v": 1, "t": time.time(), "rank": rank, "kind": "step", "step": i}), flush=True)
        if mode == "chatty":
            print(f"plain line {i} of rank {rank} " + "x" * 200, flush=True)
        time.sleep(delay)
    if mode == "fail" and rank == 1:
        error = {"v": 1, "t": time.time(), "rank": 1, "kind": "error", "message": "loss is NaN"}
        print("@lanenb " + json.dumps(error), flush=True)
        sys.exit(3)
    if rank == 0 and mode in ("ok", "chatty"):
        tmp = os.path.join(pid_dir, ".metrics.tmp")
        with open(tmp, "w") as fh:
            json.dump({"accuracy": 0.5 + steps / 100.0, "best_epoch": 1}, fh)
        os.replace(tmp, os.path.join(os.environ["LANE_RUN_DIR"], "metrics.json"))
    print(f"bye from rank {rank}", flush=True)
    """
)


@pytest.fixture(scope="session")
def rank_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    path = tmp_path_factory.mktemp("prog") / "rank_program.py"
    path.write_text(RANK_PROGRAM)
    return path


@pytest.fixture
def tiny_job(rank_program: Path, tmp_path: Path):
    """Return submit(steps, delay, mode) for the tiny program; pid files land in tmp_path/pids."""
    from lanenb.jobs import TrainSpec, submit

    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()

    def _submit(steps: int = 3, delay: float = 0.05, mode: str = "ok", grace: float = 2.0,
                backend_opts: dict | None = None, **spec_kw):
        run_dir = tmp_path / f"run-{mode}-{steps}"
        env = {"LANE_RUN_DIR": str(run_dir), **spec_kw.pop("env", {})}
        spec = TrainSpec(dataset=str(tmp_path), processes=2, run_dir=str(run_dir), env=env, **spec_kw)
        program = [sys.executable, str(rank_program), str(steps), str(delay), str(pid_dir), mode]
        return submit(spec, program=program, trainer_args=False, grace=grace, **(backend_opts or {}))

    _submit.pid_dir = pid_dir  # type: ignore[attr-defined]
    return _submit


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """48 small synthetic frames (a quarter held out for test): a few real 2-rank steps."""
    from lanenb_trainer.data.synth import synthesize

    root = tmp_path_factory.mktemp("synth") / "tusimple"
    synthesize(root, 48, seed=3, width=320, height=180, test_fraction=0.25, progress=False)
    return root
