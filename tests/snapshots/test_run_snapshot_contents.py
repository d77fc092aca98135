"""What a ``--snapshot`` run keeps (issue 42 item 9): a dataset folder unchanged since its newest
dataset snapshot is not snapshotted again (that snapshot is recorded for the new job), and the
run dir's snapshot leaves out the supervisor's own files, so a diff of two runs shows the run.
Real restic and real mpirun jobs throughout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from snapshot_support import snapshot_job_runner, write_files

import lanenb.snapshots as snaps
from lanenb.jobs import JobState, get_job

pytestmark = pytest.mark.usefixtures("restic_installed")

# what the user cares about in a run dir; everything else the supervisor keeps for itself
USER_FILES = {"checkpoints/best.pt", "metrics.json", "job.log"}
INTERNAL_PATHS = ("pids", "supervisor.err", ".exit.reserve", "job.digest", "cancel.json", "suspend.json")


@pytest.fixture
def run_job(tmp_path: Path):
    """``run(name, accuracy)`` -> (job, dataset, run dir) of a successful ``--snapshot`` job."""
    run = snapshot_job_runner(tmp_path)

    def _run(name: str, accuracy: str = "0.5"):
        job, status, data, run_dir = run(name=name, accuracy=accuracy)
        assert status.state is JobState.SUCCEEDED, "\n".join(str(line) for line in job.logs())
        return job, data, run_dir

    return _run


def _by_role(job) -> dict[str, snaps.Snapshot]:
    return {s.labels["role"]: s for s in get_job(job.name).snapshots()}


def test_a_run_on_an_unchanged_dataset_reuses_its_snapshot_and_a_changed_one_gets_a_new_one(run_job):
    first, data, _ = run_job("reuse-1")
    dataset = _by_role(first)["dataset"]
    second, _, _ = run_job("reuse-2")
    assert _by_role(second)["dataset"].id == dataset.id
    assert [s.id for s in snaps.list(str(data))] == [dataset.id]  # one dataset snapshot, not two
    log = "\n".join(str(line) for line in second.logs())
    assert f"dataset unchanged since snapshot {dataset.id}: reused" in log
    reused = [ev for ev in second.events() if ev.kind == "snapshot" and ev.get("role") == "dataset"]
    assert [ev.get("snapshot") for ev in reused] == [dataset.id]

    (data / "label_data.json").unlink()  # a file gone from the top folder (restic's dry-run counters miss it)
    (data / "test_label.json").write_text('{"lanes": [1]}\n')
    third, _, _ = run_job("reuse-3")
    new = _by_role(third)["dataset"]
    assert new.id != dataset.id and ": reused" not in "\n".join(str(line) for line in third.logs())
    assert {c.path.rsplit("/", 1)[-1]: c.change for c in snaps.diff(dataset, new).changes} == {
        "label_data.json": "removed", "test_label.json": "added"}


def test_the_first_job_keeps_its_dataset_snapshot_after_a_later_job_reused_it(run_job):
    first, _, _ = run_job("keep-1")
    run_job("keep-2")
    assert "dataset" in _by_role(first)


def test_retrain_from_a_run_that_reused_its_dataset_snapshot_finds_that_snapshot(run_job):
    from lanenb.snapshots import get_store
    from lanenb.workflows.retrain import dataset_snapshot_for

    first, _, _ = run_job("again-1")
    dataset = _by_role(first)["dataset"]
    second, _, _ = run_job("again-2")
    assert dataset_snapshot_for(get_store("local"), _by_role(second)["run"]).id == dataset.id


def test_the_run_snapshot_leaves_out_the_supervisors_files_so_a_diff_shows_the_run(run_job):
    first, _, run_dir = run_job("diff-1", accuracy="0.5")
    assert (run_dir / "pids").is_dir() and (run_dir / "supervisor.err").exists()  # they are there to leave out
    a = _by_role(first)["run"]
    second, _, _ = run_job("diff-2", accuracy="0.75")
    b = _by_role(second)["run"]
    kept = {f.path.lstrip("/") for f in snaps.files(a) if f.type == "file"}  # paths inside the volume
    assert kept >= USER_FILES
    assert not [p for p in kept if p.split("/")[0] in INTERNAL_PATHS]
    changed = {c.path.lstrip("/"): c.change for c in snaps.diff(a, b).changes}
    assert changed["metrics.json"] == "changed" and changed["checkpoints/best.pt"] == "changed"
    assert not [p for p in changed if p.split("/")[0] in INTERNAL_PATHS], changed


def test_the_names_left_out_are_the_supervisors():
    # snapshot_run spells them (the supervisor imports it: importing back would be a cycle)
    from lanenb.backends.local import supervise
    from lanenb.backends.local.snapshot_run import INTERNAL
    from lanenb_trainer.stopping import CANCEL_NAME, SUSPEND_NAME

    assert set(INTERNAL) == {supervise.PIDS_NAME, supervise.RESERVE_NAME, supervise.DIGEST_NAME,
                             supervise.EXIT_NAME, CANCEL_NAME, SUSPEND_NAME, "supervisor.err"}
    backend = Path(supervise.__file__).with_name("backend.py").read_text()
    assert 'run / "supervisor.err"' in backend


# ---------------------------------------------------------------- the store underneath
@pytest.fixture
def store():
    from lanenb.snapshots.local import ResticStore

    return ResticStore()


@pytest.mark.parametrize("edit", [
    pytest.param(lambda d: (d / "top.txt").unlink(), id="a file removed from the top folder"),
    pytest.param(lambda d: (d / "sub" / "b.txt").write_text("b"), id="a file rewritten with the same bytes"),
    pytest.param(lambda d: (d / "sub" / "new.txt").write_text(""), id="an empty file added"),
    pytest.param(lambda d: os.chmod(d / "sub" / "b.txt", 0o600), id="a mode changed"),
    pytest.param(lambda d: (d / "sub").rename(d / "sub2"), id="a folder renamed"),
])
def test_unchanged_since_sees_every_change(store, tmp_path, edit):
    data = tmp_path / "data"
    write_files(data, {"top.txt": "t", "sub/b.txt": "b"})
    snap = store.create(str(data))
    assert store.unchanged_since(str(data), snap)
    edit(data)
    assert not store.unchanged_since(str(data), snap)


def test_unchanged_since_is_false_for_another_folder_or_an_unknown_manifest(store, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    write_files(one, {"a": "1"})
    write_files(two, {"a": "1"})
    snap = store.create(str(one))
    assert not store.unchanged_since(str(two), snap)
    (store.meta_dir / f"{store._full_id(snap)}.json").unlink()  # the cache cleared: nobody can tell
    assert not store.unchanged_since(str(one), snap)


def test_exclude_leaves_out_that_path_only_even_with_glob_characters_in_the_volume(store, tmp_path):
    run = tmp_path / "run [1]*?"
    write_files(run, {"pids/rank-0.json": "{}", "checkpoints/pids/keep.txt": "k", "supervisor.err": "",
                      "job.log": "l"})
    snap = store.create(str(run), exclude=["pids", "supervisor.err"])
    names = {f.path.lstrip("/") for f in store.files(snap) if f.type == "file"}
    assert names == {"checkpoints/pids/keep.txt", "job.log"}
    (run / "pids" / "rank-1.json").write_text("{}")  # excluded files change: the snapshot still holds
    assert store.unchanged_since(str(run), snap)


@pytest.mark.parametrize("bad", [["/abs"], ["../up"], ["."], "pids"])
def test_exclude_takes_relative_paths_inside_the_volume(store, tmp_path, bad):
    (tmp_path / "v").mkdir()
    with pytest.raises(snaps.SnapshotInputError, match="exclude"):
        store.create(str(tmp_path / "v"), exclude=bad)


# ---------------------------------------------------------------- the words on screen
def test_the_empty_list_hint_never_wraps_inside_a_command():
    from lanenb.commands.snapshots import versions_table

    table = versions_table([], links={})
    assert "<code style='white-space:nowrap'>--snapshot</code>" in table.html()
    assert "<code style='white-space:nowrap'>lanenb snap create DIR</code>" in table.html()
    assert table.text() == "no snapshots yet (lanenb snap create DIR, or train with --snapshot)"


def test_the_browsers_diff_button_names_the_two_versions_it_diffs(store, tmp_path):
    from lanenb.notebook import SnapshotBrowser

    data = tmp_path / "data"
    write_files(data, {"a": "1"})
    older = store.create(str(data))
    write_files(data, {"a": "22"})
    newer = store.create(str(data))
    browser = SnapshotBrowser(store)
    assert browser.diff_button.description == "Diff two picked versions"
    browser.pick.value = (newer.id, older.id)
    assert browser.diff_button.description == f"Diff {older.id} → {newer.id}"
    browser.pick.value = (older.id,)
    assert browser.diff_button.description == "Diff two picked versions"
