"""Rank discovery from each launcher's environment and engine selection errors."""

from __future__ import annotations

import re

import pytest

from lanenb_trainer.engines import EngineError, get_engine, horovod_available
from lanenb_trainer.engines.base import threads_per_rank
from lanenb_trainer.engines.ddp import DDPEngine, ranks_from_env


@pytest.mark.parametrize("env,expected", [
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
      "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, (3, 4, 1, 2)),
    ({"PMI_RANK": "2", "PMI_SIZE": "3"}, (2, 3, 2, 3)),
    ({"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1"}, (2, 3, 0, 1)),
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, (1, 2, 1, 2)),
    ({}, (0, 1, 0, 1)),
])
def test_ranks_from_each_launcher(env, expected):
    assert ranks_from_env(env) == expected


def test_bad_rank_variables_are_named():
    with pytest.raises(EngineError, match=re.escape("OMPI_COMM_WORLD_RANK=5 is outside 0..1")):
        ranks_from_env({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "2"})
    with pytest.raises(EngineError, match="PMI_SIZE='x' is not an integer"):
        ranks_from_env({"PMI_RANK": "0", "PMI_SIZE": "x"})


def test_ddp_needs_master_address(monkeypatch):
    for var in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    with pytest.raises(EngineError, match="needs MASTER_ADDR and MASTER_PORT"):
        DDPEngine().init()


def test_single_process_ddp_engine(monkeypatch):
    import torch

    for var in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    threads = torch.get_num_threads()
    try:
        eng = get_engine("ddp").init()
        assert (eng.rank, eng.world_size, eng.device.type) == (0, 1, "cpu")
        assert eng.gather_objects({"a": 1}) == [{"a": 1}]
        assert eng.allreduce_sum(torch.tensor([2.0])).item() == 2.0
    finally:
        torch.set_num_threads(threads)


def test_unknown_and_unavailable_engines():
    with pytest.raises(EngineError, match="unknown engine 'mpi'"):
        get_engine("mpi")
    if not horovod_available():
        with pytest.raises(EngineError, match=re.escape("horovod.torch is not importable")):
            get_engine("horovod")
        assert get_engine("auto").name == "ddp"
    else:
        assert get_engine("auto").name == "horovod"


def test_threads_per_rank(monkeypatch):
    monkeypatch.delenv("LANENB_THREADS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(8)))
    assert threads_per_rank(2) == 4
    assert threads_per_rank(16) == 1


@pytest.mark.horovod
def test_horovod_gathers_none_from_a_rank(tmp_path):
    """A rank with nothing to send (None) must not hang the others (Horovod 0.28 hangs on a bare None)."""
    import shutil
    import subprocess
    import sys

    pytest.importorskip("horovod.torch")
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun missing")
    prog = tmp_path / "gather.py"
    prog.write_text(
        "from lanenb_trainer.engines import get_engine\n"
        "eng = get_engine('horovod').init()\n"
        "import sys\n"
        "sys.stdout.write(f'{eng.rank} {eng.gather_objects({\"w\": 1} if eng.rank == 0 else None)}\\n')\n"
        "sys.stdout.flush()\n")
    out = subprocess.run(["mpirun", "--allow-run-as-root", "-np", "2", "--oversubscribe", "--tag-output", "--mca",
                          "mpi_yield_when_idle", "1", sys.executable, str(prog)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = sorted(line.split(">:", 1)[1].strip() for line in out.stdout.splitlines() if ">:" in line)
    assert lines == ["0 [{'w': 1}, None]", "1 [{'w': 1}, None]"], out.stdout
