"""`lanenb jobs prune`: finished jobs older than an age leave the registry, archived first; never
a running job, never a run dir, nothing without the command."""

from __future__ import annotations

import json

import pytest
from load_jobs import record_job

from lanenb.cli import main as cli_main
from lanenb.registry.jobs import JobRegistry

DAY = 86400.0


def _seed(home, now):
    record_job(home, "old-ok", state="succeeded", created=now - 40 * DAY, finished=now - 39 * DAY, running_here=False)
    record_job(home, "old-failed", state="failed", created=now - 35 * DAY, finished=now - 34 * DAY,
               running_here=False)
    record_job(home, "old-running", state="running", created=now - 60 * DAY)  # a run of two months goes on
    record_job(home, "recent", state="succeeded", created=now - 2 * DAY, finished=now - DAY, running_here=False)
    JobRegistry().add_snapshot("old-ok", "local", "snap1", "run", "/runs/old-ok")


def test_prune_archives_then_forgets_only_old_finished_jobs(lanenb_home):
    import time

    now = time.time()
    _seed(lanenb_home, now)
    registry = JobRegistry()
    assert [r.name for r in registry.prune(30 * DAY, dry_run=True)] == ["old-ok", "old-failed"]
    assert registry.count() == 4  # a dry run changes nothing
    pruned = registry.prune(30 * DAY)
    assert [r.name for r in pruned] == ["old-ok", "old-failed"]
    assert sorted(r.name for r in registry.list()) == ["old-running", "recent"]
    assert registry.snapshot_links("old-ok") == []
    assert (lanenb_home / "runs" / "old-ok").is_dir()  # run dirs stay
    archive = registry.last_archive
    assert archive is not None and archive.parent == lanenb_home / "archive"
    entries = [json.loads(line) for line in archive.read_text().splitlines()]
    assert sorted(e["job"]["name"] for e in entries if "job" in e) == ["old-failed", "old-ok"]
    assert [e["snapshot_link"]["snapshot"] for e in entries if "snapshot_link" in e] == ["snap1"]
    # nothing is lost: the archive's rows go back in as they were
    restored = registry.import_records([e["job"] for e in entries if "job" in e],
                                       [e["snapshot_link"] for e in entries if "snapshot_link" in e])
    assert restored == 2 and registry.get("old-ok").state == "succeeded"
    assert registry.snapshot_links("old-ok")[0]["snapshot"] == "snap1"


def test_the_prune_command_dry_run_and_bad_age(lanenb_home, capsys):
    import time

    _seed(lanenb_home, time.time())
    assert cli_main(["jobs", "prune", "--older-than", "30d", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would prune old-ok" in out and "old-running" not in out and "recent" not in out
    assert JobRegistry().count() == 4
    assert cli_main(["jobs", "prune", "--older-than", "4w"]) == 0
    assert "2 job(s) pruned" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli_main(["jobs", "prune", "--older-than", "30x"])
    assert "'30x': give an age such as 30d" in capsys.readouterr().err


def test_listing_many_jobs_reads_only_the_rows_shown(lanenb_home):
    for i in range(300):
        record_job(lanenb_home, f"j{i:03d}", state="succeeded", created=1000.0 + i, finished=1001.0 + i,
                   running_here=False)
    registry = JobRegistry()
    with registry._connect() as conn:
        plan = " ".join(r[-1] for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM jobs ORDER BY created DESC, name DESC LIMIT 20").fetchall())
    assert "USING INDEX jobs_created_name" in plan and "TEMP B-TREE" not in plan
    assert [r.name for r in registry.list(newest_first=True, limit=3)] == ["j299", "j298", "j297"]
