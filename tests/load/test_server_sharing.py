"""The server under many tabs: the jobs list is computed once per second for every sidebar, a
finished job's row is read once, a watched job's row comes from its feed's shared read."""

from __future__ import annotations

import collections

from load_jobs import record_job
from polling import wait_for

from lanenb.backends.local.backend import LocalBackend
from lanenb.server import api


def _count_reads(monkeypatch):
    reads = collections.Counter()
    original = LocalBackend.read_log

    def counting(self, spec, handle, cursor, **kwargs):
        reads[handle["run_dir"].rsplit("/", 1)[-1]] += 1
        return original(self, spec, handle, cursor, **kwargs)

    monkeypatch.setattr(LocalBackend, "read_log", counting)
    return reads


def test_finished_rows_are_read_once_and_watched_rows_share_the_feeds_read(lanenb_home, monkeypatch):
    for i in range(3):
        record_job(lanenb_home, f"done-{i}", state="succeeded", created=100.0 + i, running_here=False)
    record_job(lanenb_home, "live", created=200.0)
    (lanenb_home / "runs" / "live" / "job.log").write_text("[1,0]<stdout>:hello\n")
    api.list_job_summaries(10)  # the first reading records the running job's status (a registry change)
    reads = _count_reads(monkeypatch)
    rows = api.list_job_summaries(10)
    assert [r["name"] for r in rows] == ["live", "done-2", "done-1", "done-0"]
    assert rows[1]["state"] == "succeeded" and rows[0]["state"] == "running"
    assert api.list_job_summaries(10) is rows  # a second sidebar within LIST_TTL_S: the same reading
    monkeypatch.setattr(api, "LIST_TTL_S", 0.0)  # expired: the request gets the last reading, a thread reads anew
    assert api.list_job_summaries(10) is rows
    wait_for(lambda: api._LIST_CACHE[(str(lanenb_home), 10)][1] is not rows, 10, what="the list read again")
    monkeypatch.setattr(api, "LIST_TTL_S", 1.0)
    assert all(reads[f"done-{i}"] == 0 for i in range(3))  # a finished row never changes: read once, before
    assert reads["live"] == 2  # not watched: its tail is read for each list
    api.job_updates("live", None, tail=10)  # a tab follows it: the feed reads its log
    before = reads["live"]
    api._LIST_CACHE.clear()
    row = api.list_job_summaries(10)[0]
    assert row["name"] == "live" and row["state"] == "running"
    assert reads["live"] == before  # within the feed's tick the list reads nothing more


def test_a_stop_shows_in_the_next_list_at_once(lanenb_home):
    record_job(lanenb_home, "j", state="running", running_here=False)
    (lanenb_home / "runs" / "j" / "exit.json").write_text('{"returncode": 0}')
    first = api.list_job_summaries(5)
    api.stop_job("j", "j")
    assert api.list_job_summaries(5) is not first


def test_a_new_job_is_listed_at_once_whatever_the_kept_reading(lanenb_home):
    record_job(lanenb_home, "first", state="succeeded", created=100.0, running_here=False)
    assert [r["name"] for r in api.list_job_summaries(5)] == ["first"]
    record_job(lanenb_home, "second", state="succeeded", created=200.0, running_here=False)
    assert [r["name"] for r in api.list_job_summaries(5)] == ["second", "first"]
