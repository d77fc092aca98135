"""The server's one state per job (``lanenb.server.feeds``): many clients of one job cost one
log read per tick, every client still gets each line exactly once, a client the bounded buffer
has left behind reads for itself, a new tab starts at the live end, and the charts' state is
the same RunState a watcher folding the whole stream would hold.

The job here is a log the test grows by hand (a backend's ``read_log`` over a list, driven by
the real ``Job.poll`` logic of ``lanenb.jobs.updates``) and the feed's clock is the test's, so
"one tick" is exact rather than timed."""

from __future__ import annotations

import json

import pytest

from lanenb.analysis.runstate import RunState
from lanenb.contract.backend import LogChunk, LogLine
from lanenb.contract.status import JobState, JobStatus
from lanenb.jobs import SpecError
from lanenb.jobs.updates import poll
from lanenb.server.feeds import TICK_S, Feeds, JobFeed


class GrowingJob:
    """A job whose log is ``self.lines``; its cursor is the number of lines read."""

    name = "grow"
    created = 1.0
    spec = None
    def __init__(self) -> None:
        self.handle: dict[str, object] = {}
        self.lines: list[str] = []
        self.state = JobState.RUNNING
        self.polls = 0

    @property
    def backend(self) -> GrowingJob:
        return self

    def status(self) -> JobStatus:
        return JobStatus(self.state)

    def read_log(self, spec, handle, cursor, *, max_lines, tail_lines=None) -> LogChunk:
        start = int(cursor or 0)
        chunk = self.lines[start:start + max_lines]
        end = start + len(chunk)
        return LogChunk([(LogLine(0, text), str(start + i + 1)) for i, text in enumerate(chunk)], str(end),
                        self.state.finished and end == len(self.lines))

    def poll(self, cursor=None, *, max_lines=5000, tail_lines=None):
        self.polls += 1
        return poll(self, cursor, max_lines=max_lines, tail_lines=tail_lines)

    def step(self, n: int) -> None:
        self.lines.append("@lanenb " + json.dumps({"v": 1, "t": float(n), "rank": 0, "kind": "step", "step": n,
                                                   "total_steps": 100, "loss": 1.0 / n}))
        self.lines.append(f"plain line {n}")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def texts(reply: dict) -> list[str]:
    return [u["line"]["text"] for u in reply["updates"] if "line" in u]


@pytest.fixture
def job() -> GrowingJob:
    job = GrowingJob()
    for n in range(1, 6):
        job.step(n)
    return job


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_many_clients_of_one_job_cost_one_log_read_per_tick(job, clock):
    feed = JobFeed(job, tick_s=1.0, clock=clock)
    tabs = [feed.updates(None, tail=4) for _ in range(5)]  # five new tabs
    assert job.polls == 1 and all(texts(t) == job.lines[-4:] for t in tabs)
    cursors = [t["cursor"] for t in tabs]
    for n in range(6, 9):
        job.step(n)
    for _ in range(3):  # every tab asks three times within the same tick: nothing is read
        assert all(feed.updates(c)["updates"] == [] for c in cursors)
    assert job.polls == 1
    clock.now = 1.0  # next tick: one read, whatever the number of tabs
    replies = [feed.updates(c) for c in cursors]
    assert job.polls == 2 and feed.reads == 2
    assert all(texts(r) == job.lines[10:] for r in replies)


def test_a_client_following_the_feed_gets_every_line_once(job, clock):
    feed = JobFeed(job, tick_s=1.0, clock=clock)
    got, cursor = [], None
    reply = feed.updates(None, max_lines=3)  # from the start: a replay, read for this client
    got += texts(reply)
    assert reply["updates"][0]["status"]["state"] == "running"
    cursor = reply["cursor"]
    for tick in range(1, 8):
        clock.now = float(tick)
        if tick < 4:
            job.step(10 + tick)
        reply = feed.updates(cursor, max_lines=3)
        assert len(texts(reply)) <= 3
        got += texts(reply)
        cursor = reply["cursor"]
    assert got == job.lines
    job.state = JobState.SUCCEEDED
    clock.now = 10.0
    reply = feed.updates(cursor)
    assert reply["final"] and reply["status"]["state"] == "succeeded" and texts(reply) == []
    polls = job.polls
    clock.now = 100.0
    assert feed.updates(reply["cursor"])["final"] and job.polls == polls  # a final feed reads no more


def test_a_client_the_bounded_buffer_left_behind_reads_for_itself(job, clock):
    feed = JobFeed(job, keep=4, tick_s=1.0, clock=clock)
    early = feed.updates(None, max_lines=2)["cursor"]  # two lines in, then it stops asking
    for n in range(6, 12):
        job.step(n)
    clock.now = 1.0
    feed.updates(feed.updates(None, tail=1)["cursor"])  # another tab keeps the feed moving
    reads, polls = feed.reads, job.polls
    reply = feed.updates(early)
    assert texts(reply) == job.lines[2:]  # exactly the rest, nothing lost or repeated
    assert feed.reads == reads and job.polls == polls + 1  # its own read, not the feed's


def test_a_new_tab_starts_at_the_live_end(job, clock):
    feed = JobFeed(job, tick_s=1.0, clock=clock)
    assert texts(feed.updates(None, tail=3)) == job.lines[-3:]
    assert texts(feed.updates(None, tail=100)) == job.lines  # the buffer holds the whole short log
    live = feed.updates(None, tail=0)
    assert live["updates"] == [] and live["cursor"] == feed.cursor and live["status"]["state"] == "running"


def test_the_charts_state_is_the_whole_stream_folded_once(job, clock):
    feed = JobFeed(job, tick_s=1.0, clock=clock)
    feed.updates(None, tail=1)
    for n in range(6, 9):
        job.step(n)
    clock.now = 1.0
    feed.refresh()
    expected = RunState().apply_all(job.poll(None).updates)
    view = feed.view()
    assert view["series"]["loss"]["x"] == expected.series["loss"].x == [1, 2, 3, 4, 5, 6, 7, 8]
    assert view["series"]["loss"]["y"] == pytest.approx(expected.series["loss"].y)
    assert view["step"] == 8 and view["name"] == "grow" and "errors" not in view


def test_the_view_carries_the_doctors_verdict_and_the_per_rank_breakdown(job, clock):
    """What the sidebar's panel draws: the verdict line and each rank's step split, growing
    with the log like the charts (before timing: no verdict, as every face)."""
    feed = JobFeed(job, tick_s=1.0, clock=clock)
    feed.refresh()
    assert feed.view()["verdict"] is None and feed.view()["breakdown"] == {}
    for window in range(1, 4):
        for rank in (0, 1):  # rank 1 computes longer; rank 0 waits for it in the all-reduce
            compute, wait = (0.3, 0.15) if rank == 0 else (0.45, 0.0)
            job.lines.append("@lanenb " + json.dumps({
                "v": 1, "t": 10.0 * window, "rank": rank, "kind": "timing", "step": 10 * window, "steps": 10,
                "host": f"node-{rank}", "device": "cpu", "step_s": 0.5, "data_s": 0.05, "h2d_s": 0.0,
                "compute_s": compute, "exchange_s": wait + 0.0, "optimizer_s": 0.0,
                "other_s": 0.5 - 0.05 - compute - wait, "pause_s": 0.0, "pause": []}))
    clock.now = 1.0
    feed.refresh()
    view = json.loads(json.dumps(feed.view()))  # what /updates?state=1 sends
    assert view["verdict"]["kind"] == "straggler" and view["verdict"]["rank"] == 1
    busy = {0: 0.5 - 0.15, 1: 0.5}  # a step without the exchange wait
    assert view["verdict"]["line"].startswith(
        f"straggler: rank 1 is a straggler: its steps take {busy[1] / busy[0]:.1f}x the others'")
    assert view["verdict"]["host"] == "node-1" and view["timing"]["1"]["host"] == "node-1"
    assert view["breakdown"]["0"]["exchange"] == pytest.approx(0.3)
    assert view["breakdown"]["1"]["compute"] == pytest.approx(0.9)


def test_a_foreign_cursor_is_named(job, clock):
    with pytest.raises(SpecError, match="cursor='nonsense': is not a cursor"):
        JobFeed(job, clock=clock).updates("nonsense")


def test_feeds_are_bounded_and_a_reused_name_gets_a_new_feed(monkeypatch):
    made: dict[str, GrowingJob] = {}

    def get_job(name):
        job = made.setdefault(name, GrowingJob())
        job.name = name
        return job

    monkeypatch.setattr("lanenb.server.feeds.get_job", get_job)
    now = [0.0]
    feeds = Feeds(size=2, clock=lambda: now[0])
    first = feeds.get("a")
    assert feeds.get("a") is first
    feeds.get("b"), feeds.get("c")
    assert len(feeds) == 2 and feeds.get("a") is not first  # "a" was the least recently used
    old = feeds.get("c")
    made["c"].created = 2.0  # a new job under an old name
    assert feeds.get("c") is old  # within a tick the name is not looked up again
    now[0] += TICK_S
    assert feeds.get("c") is not old and len(feeds) == 2  # one tick later it is: a new feed
