"""Every list view shows the newest N jobs, newest first: ``%lanejobs``, ``lanenb jobs list``, the
sidebar's REST list (``list_job_summaries``) and ``list_jobs``. Registry rows are enough: more
jobs than the limit, created in an order their names do not sort in."""

from __future__ import annotations

import json
import sqlite3

import pytest

from lanenb.cli import main
from lanenb.errors import UserError
from lanenb.jobs import JobRegistry, list_jobs

JOBS = 25  # more than every default limit of 20


@pytest.fixture
def many_jobs(lanenb_home) -> list[str]:
    """25 finished local jobs; returns their names newest first. Names count down while creation
    times count up, so an order by name (or the registry's insertion order) shows up as wrong."""
    registry = JobRegistry()
    names = [f"job-{JOBS - i:02d}" for i in range(JOBS)]  # job-25 (oldest) ... job-01 (newest)
    for name in names:
        registry.add(name, "local", {"dataset": "/nowhere", "processes": 1}, run_dir=None, state="succeeded")
    with sqlite3.connect(registry.path) as conn:
        for i, name in enumerate(names):
            conn.execute("UPDATE jobs SET created=? WHERE name=?", (1_700_000_000.0 + 60 * i, name))
    return names[::-1]


def test_list_jobs_newest_first_and_limited(many_jobs):
    assert [j.name for j in list_jobs(newest_first=True, limit=20)] == many_jobs[:20]
    assert [j.name for j in list_jobs(newest_first=True)] == many_jobs
    assert [j.name for j in list_jobs()] == many_jobs[::-1]  # the API's default stays oldest first
    assert JobRegistry().count() == JOBS
    with pytest.raises(UserError, match="limit=0: must be an integer >= 1"):
        list_jobs(limit=0)


def test_lanejobs_shows_the_newest_jobs(ip, many_jobs, capsys):
    ip.run_line_magic("lanejobs", "")
    shown = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("job-")]
    assert shown == many_jobs[:20]
    ip.run_line_magic("lanejobs", "--limit 3")
    shown = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("job-")]
    assert shown == many_jobs[:3] == ["job-01", "job-02", "job-03"]


def test_cli_jobs_list_shows_the_newest_jobs(many_jobs, capsys):
    assert main(["jobs", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:21]] == many_jobs[:20]
    assert lines[-1] == f"(20 newest of {JOBS} jobs; --all lists every job)"
    assert main(["jobs", "list", "--limit", "2", "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["job-01", "job-02"]
    assert main(["jobs", "list", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == many_jobs
    assert main(["jobs", "list", "--limit", "0"]) == 2
    assert "--limit must be >= 1, got 0" in capsys.readouterr().err


def test_sidebar_list_shows_the_newest_jobs(many_jobs):
    from lanenb.server.api import list_job_summaries

    assert [s["name"] for s in list_job_summaries(limit=20)] == many_jobs[:20]
    assert [s["name"] for s in list_job_summaries(limit=1)] == ["job-01"]
