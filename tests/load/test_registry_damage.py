"""A damaged registry: a clear error naming the file and `lanenb jobs repair`; repair sets the
file aside, keeps what it can read and rebuilds local jobs from their run dirs."""

from __future__ import annotations

import json

import pytest
from load_jobs import record_job

from lanenb.cli import main as cli_main
from lanenb.jobs.job import _keep_record
from lanenb.registry.jobs import JobRegistry, RegistryDamagedError
from lanenb.registry.repair import repair_registry


def _damage(path, change):
    """Another process ruins the file while nobody has it open: the WAL checkpointed into it first."""
    registry = JobRegistry(path)
    with registry._connect() as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    registry.close()
    for extra in path.parent.glob(f"{path.name}-*"):
        extra.unlink()
    path.write_bytes(change(path.read_bytes()))


def _seed(home, count=30):
    for i in range(count):
        record_job(home, f"job-{i:02d}", state="succeeded", created=1000.0 + i, finished=1100.0 + i,
                   running_here=False)
    for name in ("job-03", "job-07"):  # what submit() keeps in a local job's run dir
        _keep_record(JobRegistry().get(name))
    return home / "jobs.sqlite3"


@pytest.mark.parametrize("damage", [
    pytest.param(lambda b: b"\x00not sqlite at all" * 32 + b[512:], id="header-overwritten"),
    pytest.param(lambda b: b[:9], id="truncated-inside-the-header"),
])
def test_a_damaged_file_is_named_with_the_repair_command(lanenb_home, damage):
    path = _seed(lanenb_home)
    _damage(path, damage)
    with pytest.raises(RegistryDamagedError) as info:
        JobRegistry().list()
    assert str(path) in str(info.value) and "lanenb jobs repair" in str(info.value)


def test_pages_overwritten_in_the_middle_are_reported_when_read(lanenb_home, tmp_path):
    path = _seed(lanenb_home, count=200)
    _damage(path, lambda b: b[:4096] + b"\xff" * (len(b) - 8192) + b[-4096:])  # header page kept, the rest ruined
    with pytest.raises(RegistryDamagedError) as info:
        JobRegistry().list()
    assert str(path) in str(info.value) and "malformed" in str(info.value)
    report = repair_registry()
    assert report.damaged and report.problem  # SQLite's words: "malformed", or the integrity check's pages
    assert JobRegistry().count() == len(report.salvaged) + len(report.rebuilt) >= 2


def test_repair_sets_the_file_aside_and_rebuilds_local_jobs_from_their_run_dirs(lanenb_home, capsys):
    path = _seed(lanenb_home)
    _damage(path, lambda b: b"garbage" * 100)
    assert cli_main(["jobs", "list"]) == 2
    assert "lanenb jobs repair" in capsys.readouterr().err
    report = repair_registry()
    assert report.damaged and report.moved_to is not None and report.moved_to.read_bytes() == b"garbage" * 100
    assert report.rebuilt == ["job-03", "job-07"] and report.salvaged == []
    rebuilt = JobRegistry().get("job-03")
    assert rebuilt.run_dir == str(lanenb_home / "runs" / "job-03") and rebuilt.handle["run_dir"] == rebuilt.run_dir
    assert (lanenb_home / "runs" / "job-05").is_dir()  # nothing in a run dir is touched


def test_repair_reads_back_rows_of_a_file_sqlite_still_opens_and_never_duplicates(lanenb_home):
    path = _seed(lanenb_home)
    _damage(path, lambda b: b[:9])  # the header cut: the copy set aside still holds no readable rows
    report = repair_registry()
    assert report.damaged and sorted(report.rebuilt) == ["job-03", "job-07"]
    assert repair_registry().damaged is False  # once repaired, repair finds nothing more to do
    assert JobRegistry().count() == 2


def test_a_healthy_registry_is_not_changed_by_repair(lanenb_home, capsys):
    path = _seed(lanenb_home, count=8)
    before = JobRegistry().count()
    assert cli_main(["jobs", "repair"]) == 0
    assert "no damage found" in capsys.readouterr().out
    assert JobRegistry().count() == before and not list(path.parent.glob("*.damaged-*"))


def test_a_registry_truncated_to_nothing_beside_recorded_run_dirs_is_damage(lanenb_home):
    path = _seed(lanenb_home, count=10)
    _damage(path, lambda b: b"")
    with pytest.raises(RegistryDamagedError, match="0 bytes"):
        JobRegistry()
    report = repair_registry()
    assert sorted(report.rebuilt) == ["job-03", "job-07"]
    assert json.loads((lanenb_home / "runs" / "job-03" / "job.json").read_text())["name"] == "job-03"
