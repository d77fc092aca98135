"""One reduced state per job in the server, shared by every browser tab watching it.

A ``JobFeed`` reads its job's log from one ``Job.poll`` cursor, at most once per ``tick_s``
however many clients ask, and keeps two things from that one read:

- the job's ``RunState`` (progress, accuracy and the chart series: bounded ``BucketSeries``),
  from which the job panel's state (``panel_state``: what ``updates?state=1`` carries) and the
  ``metrics`` route (``view``: the whole state, for scripts) are built;
- the most recent updates as JSON (a bounded buffer indexed by cursor), from which each
  client's update stream is served: a client whose cursor is in the buffer gets the updates
  after it without any log read of its own.

A cursor the buffer no longer holds (a client far behind, or replaying the log from its start)
falls back to a ``Job.poll`` of its own from that cursor: correct, just not shared. ``Feeds``
keeps the feeds of the most recently watched jobs (bounded, least recently used dropped).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import lanenb.server.payloads as payloads
from lanenb.analysis.chartdata import rank_table, run_rows, run_specs
from lanenb.analysis.doctor import shown_verdict
from lanenb.analysis.event_text import event_text
from lanenb.analysis.runstate import RunState, fill_config
from lanenb.analysis.summary import job_summary
from lanenb.errors import UserError
from lanenb.home import lanenb_home
from lanenb.jobs import get_job
from lanenb.jobs.updates import Update, UpdateBatch, split_cursor

if TYPE_CHECKING:
    from lanenb.jobs import Job

__all__ = ["JobFeed", "Feeds", "update_dict", "MAX_LINES", "TICK_S"]

MAX_LINES = 2000   # the most log lines one reply carries, and the updates a feed keeps
TICK_S = 0.5       # a feed reads its log at most this often, whatever the number of clients
MAX_POINTS = 256   # buckets per chart series (``BucketSeries``)


def update_dict(update: Update) -> payloads.Update:
    """An update as the browser reads it: ``display`` is the line in words (``event_text``),
    None for system samples and timing windows (charted, not logged)."""
    out: payloads.Update = {"cursor": update.cursor}
    if update.status is not None:
        out["status"] = cast(payloads.JobStatus, update.status.to_dict())
    if update.line is not None:
        out["line"] = {"rank": update.line.rank, "text": update.line.text, "source": update.line.source,
                       "error": update.line.error}  # what the views highlight: one rule (LogLine.error)
        text: str | None = update.line.text
        if update.event is not None:
            out["event"] = update.event.to_dict()
            text = event_text(update.event)
        out["display"] = text
    return out


def _take(updates: list[payloads.Update], max_lines: int) -> list[payloads.Update]:
    """The longest prefix of ``updates`` with at most ``max_lines`` log lines."""
    lines = 0
    for i, update in enumerate(updates):
        if "line" in update:
            lines += 1
            if lines > max_lines:
                return updates[:i]
    return updates


class JobFeed:
    """One job's shared reduced state and recent updates, read from one cursor.

    Args:
        job: the job (``poll`` is all that is used).
        keep: updates kept for clients that are behind (their cursors resume from here).
        tick_s: the least time between two log reads.
        clock: monotonic seconds (a test's fake clock).
    """

    def __init__(self, job: Job, *, keep: int = MAX_LINES, tick_s: float = TICK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.job = job
        self.state = RunState(max_points=MAX_POINTS, max_log_lines=1)  # the log pane is fed from updates
        fill_config(self.state, job)  # the doctor's advice names the spec's loader workers until the start event
        self.cursor: str | None = None
        self.final = False
        self.status: payloads.JobStatus | None = None
        self.reads = 0  # log reads (Job.poll calls) made by this feed
        self._keep = keep
        self._tick_s = tick_s
        self._clock = clock
        self._read_at: float | None = None
        self._recent: collections.deque[payloads.Update] = collections.deque()
        self._first = 0  # sequence number of self._recent[0]
        self._next = 0   # sequence number of the next update
        self._after: collections.OrderedDict[str, int] = collections.OrderedDict()  # cursor -> next seq
        self._lock = threading.RLock()
        self._panel: tuple[tuple[Any, ...], payloads.JobPanelState] | None = None
        self._view: tuple[tuple[Any, ...], dict[str, Any]] | None = None

    # ------------------------------------------------------------------ reading
    def refresh(self) -> None:
        """Read what is new since the feed's cursor, unless the last read is younger than
        ``tick_s`` or the job is final (nothing more will come)."""
        with self._lock:
            now = self._clock()
            if self.final or (self._read_at is not None and now - self._read_at < self._tick_s):
                return
            self._read_at = now
            while True:  # a long log on the first read: every batch, so the charts hold the whole run
                batch = self.job.poll(self.cursor, max_lines=MAX_LINES)
                self.reads += 1
                self._fold(batch)
                if batch.final or len(batch.updates) < MAX_LINES:
                    break

    def _fold(self, batch: UpdateBatch) -> None:
        self.state.apply_all(batch.updates)
        for update in batch.updates:
            self._recent.append(update_dict(update))
            self._next += 1
            self._mark(update.cursor)
        self.cursor, self.final = batch.cursor, batch.final
        self.status = cast(payloads.JobStatus, batch.status.to_dict()) if batch.status else self.status
        self._mark(batch.cursor)
        while len(self._recent) > self._keep:
            self._recent.popleft()
            self._first += 1
        while self._after and next(iter(self._after.values())) < self._first:
            self._after.popitem(last=False)

    def _mark(self, cursor: str) -> None:
        """Remember that the updates after ``cursor`` start at the next sequence number."""
        self._after[cursor] = self._next
        self._after.move_to_end(cursor)  # values stay in insertion order: evicted from the front

    # ------------------------------------------------------------------ serving
    def summary(self, now: float | None = None) -> payloads.JobSummary:
        """The job's list row (``job_summary``) from the feed's state, read under its lock: a
        jobs list showing a watched job reads none of its log."""
        self.refresh()
        with self._lock:
            return cast(payloads.JobSummary, job_summary(self.job, self.state, now=now))

    def _built_for(self) -> tuple[Any, ...]:
        """What a built state depends on: it is built again only after the log was read."""
        return (self.reads, self.state.events_seen, self.state.state, len(self.state.logs))

    def panel_state(self) -> payloads.JobPanelState:
        """What the job panel draws, sent as ``state`` in ``updates?state=1``: the status line's
        fields, the ``headline`` (``Headline.to_dict()``), the doctor's ``verdict``
        (``Verdict.to_dict()``, None when ``shown_verdict`` shows none), the per-rank table
        (``rank_table``) and the ``charts`` (the panel specs and their rows, the same ones the
        notebook's view draws). Only these: the raw histories (``series``, per-epoch values,
        ``system``) are the charts' rows already, and are ``view``'s. Built once per read of the
        log, however many tabs ask."""
        with self._lock:
            key = self._built_for()
            if self._panel is None or self._panel[0] != key:
                state, found, verdict = self.state, self.state.headline(), shown_verdict(self.state)
                built: payloads.JobPanelState = {
                    "state": state.state, "step": state.step, "total_steps": state.total_steps,
                    "epoch": state.epoch, "epochs_total": state.epochs,
                    "progress": state.progress, "eta_s": state.eta_s, "world_size": state.world_size,
                    "headline": None if found is None else cast(payloads.Headline, found.to_dict()),
                    "verdict": None if verdict is None else cast(payloads.Verdict, verdict.to_dict()),
                    "ranks": cast(list[payloads.RankRow], rank_table(state)),
                    "charts": {"specs": run_specs(state), "rows": run_rows(state)},
                }
                self._panel = (key, built)
            return self._panel[1].copy()  # the cached dict's keys stay as built

    def view(self) -> dict[str, Any]:
        """The whole reduced state as JSON, for ``GET .../metrics`` (the run's chart history for
        scripts): ``RunState.to_dict()`` (loss/LR/throughput per step, val metrics per epoch,
        per-rank system samples, per-rank step ``breakdown`` and ``timing``), the fields of
        ``panel_state``, the headline ``accuracy``, the job's ``name`` and ``feed`` (how often the
        log was read: ``bench/load.py``). Built once per read of the log."""
        with self._lock:
            key = self._built_for()
            if self._view is None or self._view[0] != key:
                data = self.state.to_dict()
                data.pop("errors", None)  # tracebacks: the log shows them
                data.update(self.panel_state())
                data["accuracy"] = self.state.accuracy()
                data["name"] = self.job.name
                self._view = (key, data)
            data = dict(self._view[1])  # the cached dict's keys stay as built
        data["feed"] = {"reads": self.reads, "tick_s": self._tick_s}
        return data

    def updates(self, cursor: str | None, max_lines: int = MAX_LINES, *,
                tail: int | None = None) -> payloads.UpdateBatch:
        """The updates after ``cursor`` (``Job.poll``'s cursors), from the shared buffer when it
        holds that cursor.

        Args:
            cursor: where the client is; None replays the log from its start (``Job.poll(None)``).
            max_lines: the most log lines in the reply.
            tail: with ``cursor`` None, start at the live end instead: the last ``tail`` log lines
                the feed keeps (a new browser tab on a long run, without re-reading its log).

        Returns:
            ``{"updates", "cursor", "final", "status"}``; pass ``cursor`` back.

        Raises:
            SpecError: ``cursor`` is not one this stream returned.
        """
        split_cursor(cursor)  # a foreign cursor is a SpecError before anything is read
        with self._lock:  # one thread at a time uses the job (its registry row, its backend)
            if cursor is None:
                if tail is None:
                    return self._own_read(None, max_lines)
                self.refresh()
                return self._tail(tail)
            self.refresh()
            reply = self._from_buffer(cursor, max_lines)
            return reply if reply is not None else self._own_read(cursor, max_lines)

    def _tail(self, lines: int) -> payloads.UpdateBatch:
        recent = list(self._recent)
        count, start = 0, len(recent)
        while start > 0 and count < lines:
            start -= 1
            count += "line" in recent[start]
        return {"updates": recent[start:], "cursor": self.cursor, "final": self.final, "status": self.status}

    def _from_buffer(self, cursor: str, max_lines: int) -> payloads.UpdateBatch | None:
        seq = self._after.get(cursor)
        if seq is None or seq < self._first:
            return None
        rest = list(self._recent)[seq - self._first:]
        taken = _take(rest, max_lines)
        if len(taken) < len(rest):
            return {"updates": taken, "cursor": taken[-1]["cursor"] if taken else cursor, "final": False,
                    "status": self.status}
        return {"updates": taken, "cursor": self.cursor, "final": self.final, "status": self.status}

    def _own_read(self, cursor: str | None, max_lines: int) -> payloads.UpdateBatch:
        """A client outside the buffer: its own ``Job.poll`` from its cursor."""
        batch = self.job.poll(cursor, max_lines=max_lines)
        return {"updates": [update_dict(u) for u in batch.updates], "cursor": batch.cursor,
                "final": batch.final,
                "status": cast(payloads.JobStatus, batch.status.to_dict()) if batch.status else None}


def _key(name: str, created: float | None) -> str:
    """A feed's key: the registry (``$LANENB_HOME``), the name and the job's creation time (a
    name reused by a new job, or the same name in another home, is another feed)."""
    return f"{lanenb_home()}|{name}@{created}"


class Feeds:
    """The feeds of the most recently watched jobs: bounded, thread-safe, keyed by name and
    creation time (a name reused by a new job gets a new feed)."""

    def __init__(self, size: int = 32, **feed_options: Any) -> None:
        if not isinstance(size, int) or size < 1:
            raise UserError(f"size={size!r}: must be an integer >= 1")
        self._size = size
        self._options = feed_options
        self._clock: Callable[[], float] = feed_options.get("clock", time.monotonic)
        self._recheck_s = float(feed_options.get("tick_s", TICK_S))
        self._names: dict[str, tuple[str, float]] = {}  # name -> (feed key, when it was read)
        self._items: collections.OrderedDict[str, JobFeed] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str) -> JobFeed:
        """The feed of job ``name``, made on first use. Which job holds the name is read from
        the registry at most once per ``tick_s`` (a name reused by a new job gets a new feed
        within a tick), not on every request of every tab.

        Raises:
            JobNotFoundError: no job is called ``name``.
        """
        with self._lock:
            known = self._names.get(_key(name, None))
            if known is not None and self._clock() - known[1] < self._recheck_s and known[0] in self._items:
                self._items.move_to_end(known[0])
                return self._items[known[0]]
        job = get_job(name)
        key = _key(name, job.created)
        with self._lock:
            self._names[_key(name, None)] = (key, self._clock())
            feed = self._items.get(key)
            if feed is None:
                feed = self._items[key] = JobFeed(job, **self._options)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            for stale in [n for n, (k, _) in self._names.items() if k not in self._items]:
                del self._names[stale]
            return feed

    def peek(self, name: str, created: float | None) -> JobFeed | None:
        """The feed of job ``name`` made at ``created`` if one is kept; never makes one (a list
        of jobs uses the feeds of the jobs someone is watching, and reads the others' tails)."""
        with self._lock:
            return self._items.get(_key(name, created))

    def __len__(self) -> int:
        return len(self._items)
