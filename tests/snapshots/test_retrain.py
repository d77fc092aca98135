""""Retrain from this snapshot" in one call, one magic, one button, with the real trainer: a
short run with ``--snapshot``, then a new job on a restored copy of its dataset version."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

import lanenb
from lanenb.contract.spec import SpecError
from lanenb.jobs import JobState, TrainSpec, get_job, list_jobs, submit
from lanenb.snapshots import SnapshotInputError, TargetExistsError

pytestmark = [pytest.mark.usefixtures("restic_installed"), pytest.mark.slow]

TINY = ["--img-height", "64", "--img-width", "128", "--log-every", "1"]


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def trained(tmp_path: Path):
    """A real 2-step run of the trainer with --snapshot; returns (job, dataset dir, its digest then)."""
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    from lanenb_trainer.data.synth import synthesize

    data = tmp_path / "tusimple"
    synthesize(data, frames=6, width=320, height=180, progress=False)
    spec = TrainSpec(dataset=str(data), processes=1, batch_size=1, epochs=1, max_steps=2, use_val=False,
                     name="lane-orig", enable_snapshot=True, extra_args=TINY)
    job = submit(spec)
    status = job.wait(timeout=300)
    assert status.state is JobState.SUCCEEDED, "\n".join(str(line) for line in job.logs())
    return job, data, _digest(data)


def test_retrain_restores_the_dataset_version_and_trains_with_the_run_records_settings(trained, tmp_path):
    job, data, digest = trained
    by_role = {s.labels["role"]: s for s in job.snapshots()}
    first_label = next(data.rglob("*.json"))
    first_label.write_text("[]")  # the live dataset moves on after the run
    again = lanenb.retrain(by_role["run"].id, str(tmp_path / "tusimple-v1"), name="lane-again", max_steps=1)
    restored = tmp_path / "tusimple-v1"
    assert again.spec.dataset == str(restored) and _digest(restored) == digest  # the run's dataset version
    old = job.spec
    assert (again.spec.processes, again.spec.batch_size, again.spec.extra_args, again.spec.enable_snapshot) == \
        (old.processes, old.batch_size, old.extra_args, old.enable_snapshot)
    assert again.spec.max_steps == 1 and again.run_dir and again.run_dir != job.run_dir
    status = again.wait(timeout=300)
    assert status.state is JobState.SUCCEEDED, "\n".join(str(line) for line in again.logs())
    assert get_job("lane-again").spec.dataset == str(restored)
    assert {s.labels["role"] for s in again.snapshots()} == {"run", "dataset"}  # and it is versioned too


def test_retrain_refuses_an_existing_target_and_bad_overrides_before_restoring(trained, tmp_path):
    job, data, _ = trained
    dataset_snap = next(s for s in job.snapshots() if s.labels["role"] == "dataset")
    jobs_before = len(list_jobs())
    with pytest.raises(TargetExistsError, match="already exists"):
        lanenb.retrain(dataset_snap, str(data))  # the Snapshot object, as its id below
    with pytest.raises(SpecError, match="epochs"):
        lanenb.retrain(dataset_snap, str(tmp_path / "v2"), epochs=0)
    with pytest.raises(SnapshotInputError, match="'colour'"):
        lanenb.retrain(dataset_snap.id, str(tmp_path / "v2"), colour="blue")
    assert not (tmp_path / "v2").exists() and len(list_jobs()) == jobs_before


def test_lanesnap_retrain_and_the_browsers_retrain_button_submit_jobs(trained, tmp_path):
    from IPython.testing.globalipapp import start_ipython

    from lanenb.notebook import SnapshotBrowser

    job, _, digest = trained
    dataset_snap = next(s for s in job.snapshots() if s.labels["role"] == "dataset")
    from IPython import get_ipython

    ip = start_ipython() or get_ipython()  # one shell per process: another test may have started it
    ip.run_line_magic("load_ext", "lanenb")
    ip.run_line_magic("lanesnap", f"retrain {dataset_snap.id} --to {tmp_path / 'v-magic'} --name lane-magic "
                                  "--max-steps 1")
    magic = get_job("lane-magic")
    assert magic.spec.dataset == str(tmp_path / "v-magic") and _digest(tmp_path / "v-magic") == digest
    browser = SnapshotBrowser(labels={"role": "dataset"})
    browser.pick.value = (dataset_snap.id,)
    browser.retrain_button.click()
    assert browser.confirm_box.layout.display == "flex" and browser.job is None
    browser.new_name.value = str(tmp_path / "v-button")
    browser.confirm_button.click()
    assert browser.job is not None and "submitted" in browser.message.value
    assert browser.job.spec.dataset == str(tmp_path / "v-button")
    for submitted in (magic, browser.job):
        assert submitted.wait(timeout=300).state is JobState.SUCCEEDED
