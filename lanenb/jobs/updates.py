"""One resumable update stream for every watcher of a job: "history so far + live tail".

``Job.poll(cursor)`` never blocks: it returns what happened since ``cursor`` (a status change,
then the new log lines with their parsed ``@lanenb`` events) and the cursor to continue
from. ``Job.updates(cursor)`` is the blocking iterator built on it. A view that re-attaches
(a second view, a new kernel holding a saved cursor) continues where it was instead of
re-reading the log from byte 0.

Each backend only has to read its log from a cursor (``Backend.read_log``): the local one
seeks in ``job.log``; the Kubernetes one asks the launcher pod's log for the lines after a
timestamp. The cursor is an opaque string: ``"<state>|<log cursor>"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lanenb.contract.backend import LogChunk, LogLine
from lanenb.contract.redact import redact_chunk
from lanenb.contract.status import JobStatus
from lanenb.errors import SpecError
from lanenb_trainer.events import Event

if TYPE_CHECKING:
    from lanenb.jobs.job import Job

__all__ = ["Update", "UpdateBatch", "poll", "split_cursor", "LogChunk"]


@dataclass(frozen=True)
class Update:
    """A status change (``status``) or one log line (``line``, with ``event`` when the line
    carries an ``@lanenb`` event: ``line.event``, the same object, parsed once).
    ``cursor`` resumes the stream right after this update."""

    cursor: str
    status: JobStatus | None = None
    line: LogLine | None = None
    event: Event | None = None


@dataclass(frozen=True)
class UpdateBatch:
    """What ``Job.poll`` returns. ``final`` is True once the job has finished and every line
    of its log has been delivered: nothing more will ever come."""

    updates: list[Update] = field(default_factory=list)
    cursor: str = "|"
    final: bool = False
    status: JobStatus | None = None


def split_cursor(cursor: str | None) -> tuple[str, str | None]:
    """``(state key, log cursor)``; ``None`` or ``""`` means from the beginning."""
    if not cursor:
        return "", None
    if not isinstance(cursor, str) or "|" not in cursor:
        raise SpecError("cursor", cursor, "is not a cursor returned by Job.poll / Update.cursor")
    state, _, log = cursor.partition("|")
    return state, (log or None)


def _state_key(status: JobStatus) -> str:
    return f"{status.state.value}:{status.reason or ''}".replace("|", "/")


def read_log(job: Job, cursor: str | None, *, max_lines: int = 5000, tail_lines: int | None = None) -> LogChunk:
    """The backend's lines after ``cursor``, redacted (the job layer's seam: whatever the backend,
    a rank that printed a secret shows ``<redacted>``). See ``Job.read_log``."""
    chunk = job.backend.read_log(job.spec, job.handle, cursor, max_lines=max_lines, tail_lines=tail_lines)
    return redact_chunk(chunk, getattr(job.spec, "env", None))


def poll(job: Job, cursor: str | None = None, *, max_lines: int = 5000,
         tail_lines: int | None = None) -> UpdateBatch:
    """See ``Job.poll``. Status is read before the log, so a final status plus a complete log
    chunk means every line written before the end is in this batch or an earlier one."""
    state_key, log_cursor = split_cursor(cursor)
    status = job.status()
    updates: list[Update] = []
    new_state = _state_key(status)
    chunk = read_log(job, log_cursor, max_lines=max_lines, tail_lines=tail_lines if log_cursor is None else None)
    if new_state != state_key:
        updates.append(Update(cursor=f"{new_state}|{log_cursor or ''}", status=status))
    for line, line_cursor in chunk.lines:
        updates.append(Update(cursor=f"{new_state}|{line_cursor}", line=line, event=line.event))
    final = status.state.finished and chunk.complete
    return UpdateBatch(updates, f"{new_state}|{chunk.cursor or ''}", final, status)
