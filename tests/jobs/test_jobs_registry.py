"""The SQLite job registry: persistence across processes and concurrent writers."""

from __future__ import annotations

import json
import multiprocessing as mp
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from lanenb.jobs import JobExistsError, JobNotFoundError, JobRegistry
from lanenb.jobs import lanenb_home as home_dir


def _writer(path: str, prefix: str, count: int, start, errors) -> None:
    reg = JobRegistry(path)
    start.wait()
    try:
        for i in range(count):
            name = f"{prefix}-{i}"
            reg.add(name, "local", {"dataset": "/d", "name": name}, f"/runs/{name}")
            reg.update(name, state="running", handle={"pid": i})
            reg.update(name, state="succeeded", metrics={"accuracy": i / count}, finished=float(i))
            reg.update("shared", status={"last_writer": prefix, "i": i})  # both fight over one row
    except Exception as exc:  # reported to the parent; an assert here would be lost
        errors.put(f"{prefix}: {type(exc).__name__}: {exc}")


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "jobs.sqlite3")
    reg = JobRegistry(path)
    reg.add("shared", "local", {"dataset": "/d"}, None)
    ctx = mp.get_context("spawn")
    start, errors = ctx.Event(), ctx.Queue()
    count = 60
    procs = [ctx.Process(target=_writer, args=(path, p, count, start, errors)) for p in ("kernel-a", "kernel-b")]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert errors.empty(), errors.get()
    records = {r.name: r for r in reg.list()}
    assert len(records) == 2 * count + 1
    for prefix in ("kernel-a", "kernel-b"):
        for i in range(count):
            rec = records[f"{prefix}-{i}"]
            assert rec.state == "succeeded" and rec.handle == {"pid": i}
            assert rec.metrics == {"accuracy": i / count} and rec.finished == float(i)
    assert records["shared"].status["i"] == count - 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_registry_survives_a_restart(tmp_path, lanenb_home):
    reg = JobRegistry()
    assert reg.path == lanenb_home / "jobs.sqlite3"
    reg.add("exp-1", "local", {"dataset": "/data", "epochs": 3}, "/runs/exp-1")
    reg.update("exp-1", state="succeeded", metrics={"accuracy": 0.9})
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import json
        from lanenb.jobs import JobRegistry
        r = JobRegistry().get("exp-1")
        print(json.dumps([r.backend, r.spec, r.state, r.metrics, r.run_dir, r.created <= r.updated]))
    """)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["local", {"dataset": "/data", "epochs": 3}, "succeeded",
                                      {"accuracy": 0.9}, "/runs/exp-1", True]


def test_lanenb_home_defaults_to_dot_lanenb(monkeypatch, tmp_path):
    monkeypatch.delenv("LANENB_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert home_dir() == tmp_path / ".lanenb"


def test_errors_name_the_job(tmp_path):
    reg = JobRegistry(tmp_path / "r.sqlite3")
    with pytest.raises(JobNotFoundError, match=r"no job named 'ghost' .*no jobs recorded yet"):
        reg.get("ghost")
    with pytest.raises(JobNotFoundError, match="no job named 'ghost'"):
        reg.update("ghost", state="failed")
    reg.add("a", "local", {}, None)
    with pytest.raises(JobExistsError, match="a job named 'a' already exists"):
        reg.add("a", "local", {}, None)
    with pytest.raises(ValueError, match=r"cannot update registry column\(s\) \['backend'\]"):
        reg.update("a", backend="kubernetes")
    reg.delete("a")
    assert reg.list() == []


def test_a_version_1_registry_keeps_its_snapshot_links_and_lets_two_jobs_share_one(tmp_path):
    """Version 1 keyed a snapshot to one job; opening such a file moves its links to the
    (job, store, snapshot) key, and a snapshot reused by a second job stays the first's too."""
    import sqlite3

    from lanenb.registry.jobs import JobRegistry

    path = tmp_path / "jobs.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE job_snapshots (job TEXT NOT NULL, store TEXT NOT NULL, snapshot TEXT NOT NULL, "
                     "role TEXT NOT NULL, volume TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (store, snapshot))")
        conn.execute("INSERT INTO job_snapshots VALUES ('a', 'local', 'abc123', 'dataset', '/data', 1.0)")
        conn.execute("PRAGMA user_version=1")
    reg = JobRegistry(path)
    reg.add_snapshot("b", "local", "abc123", "dataset", "/data")
    assert [(l["job"], l["snapshot"]) for l in reg.snapshot_links()] == [("a", "abc123"), ("b", "abc123")]
    assert [l["job"] for l in reg.snapshot_links("a")] == ["a"]
