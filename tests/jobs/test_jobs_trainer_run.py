"""A real local job: the real trainer, 2 ranks under mpirun, tiny synthetic data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lanenb.jobs import JobState, TrainSpec, get_job, submit

pytestmark = pytest.mark.slow


def _trainer_ready() -> bool:
    try:
        import lanenb_trainer.train  # noqa: F401
        from lanenb_trainer.models import build_model  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def synth_data(tmp_path_factory) -> Path:
    if not _trainer_ready():
        pytest.skip("the trainer (lanenb_trainer.models.build_model) is not available yet")
    out = tmp_path_factory.mktemp("synth") / "tusimple"
    subprocess.run([sys.executable, "-m", "lanenb", "data", "synth", "--out", str(out), "--frames", "8",
                    "--seed", "0"], check=True, capture_output=True)
    return out


def test_two_rank_training_job_end_to_end(synth_data, tmp_path):
    spec = TrainSpec(dataset=str(synth_data), processes=2, engine="ddp", batch_size=2, epochs=1,
                     max_steps=2, use_val=False, run_dir=str(tmp_path / "run"),
                     extra_args=["--img-height", "64", "--img-width", "128", "--log-every", "1"])
    job = submit(spec)
    status = job.wait(timeout=500)
    tail = "\n".join(str(line) for line in list(job.logs())[-30:])
    assert status.state is JobState.SUCCEEDED, f"{status}\n{tail}"
    events = list(job.events())
    kinds = {ev.kind for ev in events}
    assert {"start", "step", "end"} <= kinds, kinds
    assert {ev.rank for ev in events if ev.kind == "start"} == {0, 1}
    metrics_file = tmp_path / "run" / "metrics.json"
    assert metrics_file.exists()
    again = get_job(job.name)  # a new Job object, as a restarted kernel would build
    assert again.metrics == json.loads(metrics_file.read_text())
    assert again.status().state is JobState.SUCCEEDED


def test_bad_dataset_is_refused_before_anything_runs(tmp_path):
    from lanenb.jobs import list_jobs
    from lanenb_trainer.config import ConfigError

    with pytest.raises(ConfigError, match=r"--data '.*missing': no such directory"):
        submit(TrainSpec(dataset=str(tmp_path / "missing"), processes=2))
    assert list_jobs() == []  # nothing recorded for a job that never started


def test_cancel_stops_every_training_rank(synth_data, tmp_path):
    import psutil

    run_dir = tmp_path / "run-cancel"
    spec = TrainSpec(dataset=str(synth_data), processes=2, engine="ddp", batch_size=2, epochs=50,
                     use_val=False, run_dir=str(run_dir),
                     extra_args=["--img-height", "64", "--img-width", "128", "--log-every", "1"])
    job = submit(spec)
    for event in job.events(follow=True):
        if event.kind in ("start", "step"):
            break
    procs = [p for p in psutil.process_iter(["cmdline"]) if str(run_dir) in (p.info["cmdline"] or [])]
    ranks = [p for p in procs if "OMPI_COMM_WORLD_RANK" in p.environ()]  # supervisor + mpirun + ranks
    assert len(ranks) == 2, procs
    assert job.cancel().state is JobState.CANCELLED
    _gone, alive = psutil.wait_procs(procs, timeout=5)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    assert get_job(job.name).status().state is JobState.CANCELLED
