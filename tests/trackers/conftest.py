"""Fixtures of the trackers tests: one real finished 2-rank training job (tiny synthetic data)
in its own LANENB_HOME, shared by the module's tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

TINY = ["--img-height", "64", "--img-width", "160", "--log-every", "1", "--warmup-steps", "2",
        "--val-batch-size", "8", "--system-interval", "0.5"]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """LANENB_HOME for the whole module: the finished job stays in its registry across tests."""
    path = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LANENB_HOME", str(path))
        yield path


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    from lanenb_trainer.data.synth import synthesize

    root = tmp_path_factory.mktemp("synth") / "tusimple"
    synthesize(root, 48, seed=3, width=320, height=180, test_fraction=0.25, progress=False)
    return root


@pytest.fixture(scope="module")
def finished_job(home, synth, tmp_path_factory):
    """A real training job (2 ranks, ddp, 2 epochs with validation and test) that succeeded."""
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    from lanenb.jobs import JobState, TrainSpec, submit

    run_dir = tmp_path_factory.mktemp("runs") / "lane-export"
    spec = TrainSpec(dataset=str(synth), processes=2, engine="ddp", batch_size=4, epochs=2, use_val=True,
                     name="lane-export", run_dir=str(run_dir), extra_args=list(TINY))
    job = submit(spec)
    status = job.wait(timeout=400)
    tail = "\n".join(str(line) for line in list(job.logs())[-30:])
    assert status.state is JobState.SUCCEEDED, f"{status}\n{tail}"
    return job
