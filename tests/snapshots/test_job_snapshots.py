"""``--snapshot`` on a local job: after a successful run its run dir and dataset are snapshotted
by the detached supervisor, recorded in the job registry and announced as a ``snapshot`` event."""

from __future__ import annotations

from pathlib import Path

import pytest
from snapshot_support import snapshot_job_runner

import lanenb.snapshots as snaps
from lanenb.jobs import JobState, get_job

pytestmark = pytest.mark.usefixtures("restic_installed")

@pytest.fixture
def run_job(tmp_path: Path):
    return snapshot_job_runner(tmp_path)


def test_a_successful_run_with_snapshot_records_its_run_dir_and_dataset(run_job, tmp_path):
    job, status, data, run_dir = run_job()
    assert status.state is JobState.SUCCEEDED, "\n".join(str(line) for line in job.logs())
    made = get_job(job.name).snapshots()  # from the registry, as a restarted kernel sees it
    assert sorted(s.labels["role"] for s in made) == ["dataset", "run"]
    by_role = {s.labels["role"]: s for s in made}
    assert by_role["run"].volume == str(run_dir.resolve()) and by_role["dataset"].volume == str(data.resolve())
    assert all(s.labels["job"] == job.name and s.labels["accuracy"] == "0.9125" for s in made)
    restored = Path(snaps.restore(by_role["run"].id, str(tmp_path / "reproduce")))
    assert (restored / "checkpoints" / "best.pt").read_bytes() == b"0.9125" * 100
    assert "done 0" in (restored / "job.log").read_text()
    events = [ev for ev in job.events() if ev.kind == "snapshot"]
    assert sorted(ev.get("snapshot") for ev in events) == sorted(s.id for s in made)


def test_failed_runs_and_runs_without_snapshot_make_none(run_job):
    failed, status, _, _ = run_job(mode="fail", name="snap-fail")
    assert status.state is JobState.FAILED
    plain, status, _, _ = run_job(snapshot=False, name="snap-plain")
    assert status.state is JobState.SUCCEEDED
    assert failed.snapshots() == [] and plain.snapshots() == [] and snaps.list() == []


def test_a_snapshot_that_fails_is_an_event_every_view_sees_and_the_run_stays_succeeded(run_job):
    job, status, data, _ = run_job(mode="lose-data", name="snap-lost")
    assert status.state is JobState.SUCCEEDED, "\n".join(str(line) for line in job.logs())
    assert [s.labels["role"] for s in job.snapshots()] == ["run"]  # run dir first, then the dataset failed
    failed = [ev for ev in job.events() if ev.kind == "snapshot" and ev.get("status") == "failed"]
    assert len(failed) == 1 and str(data.resolve()) in failed[0].get("error")


@pytest.mark.parametrize("version", ["0+unknown", "1.4.0+g1a2b3c4.d20261127", "2.0"])
def test_run_labels_hold_any_installed_version(monkeypatch, version):
    # a checkout pip never installed is "0+unknown": '+' is no label character, and the
    # snapshot of every such run failed (seen on the GPU machine, where lanenb runs from source)
    from lanenb.backends.local import snapshot_run

    monkeypatch.setattr(snapshot_run, "__version__", version)
    labels = snapshot_run.run_labels("job-1", "run")
    assert labels["code"] == version.replace("+", "_")
