"""Reading a local job's ``job.log``: byte cursors, bounded slices, following a growing file.

The supervisor (``supervise.py``) writes the file; any process reads it here, so a restarted
kernel re-attaches by byte offset. Each line becomes one ``LogLine`` (rank and stream from
Open MPI's tag, ``lanenb_trainer.ranktag``); its ``@lanenb`` event is parsed when first asked
for, once. Apart from ``backend.py``, which answers status and cancel from the supervisor's
other files.

A reader more than ``SKIP_BYTES`` behind the end of the log (a new kernel re-attaching to a
run of days, the server's first read) is not made to fold every line: it gets the
supervisor's ``job.digest`` (the events a summary needs and a thinned sample of steps, each
at its real ``job.log`` offset), one line saying how much was summarised, then the log's last
``TAIL_BYTES``. Cursors stay plain byte offsets of ``job.log``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from lanenb.backends.local.supervise import DIGEST_NAME, SUPERVISOR_PREFIX
from lanenb.contract.backend import LogChunk
from lanenb.errors import SpecError
from lanenb.launch.lines import LogLine
from lanenb_trainer.ranktag import read_tag

__all__ = ["READ_LIMIT", "SKIP_BYTES", "TAIL_BYTES", "follow_lines", "read_chunk", "tail_text", "to_log_line"]

READ_LIMIT = 4 * 2**20  # bytes of job.log one read_chunk call looks at
SKIP_BYTES = 64 * 2**20  # a reader further behind than this gets the digest, then the tail
TAIL_BYTES = 2 * 2**20  # how much of the log's end such a reader then reads line by line


def to_log_line(raw: bytes) -> LogLine:
    """One line of ``job.log`` (without its newline): a rank's line (tagged), the supervisor's
    own (``SUPERVISOR_PREFIX``) or mpirun's (neither)."""
    text = raw.decode("utf-8", errors="replace").rstrip("\r")
    rank, stream, rest = read_tag(text)
    if rank is not None:  # same shape as the Kubernetes launcher pod's lines
        return LogLine(rank, rest, "launcher", stream)
    if text.startswith(SUPERVISOR_PREFIX):
        return LogLine(None, text[len(SUPERVISOR_PREFIX):], "supervisor", "supervisor")
    return LogLine(None, text, "launcher", stream)


def tail_text(path: Path, tail_bytes: int) -> list[str]:
    """The lines of the last ``tail_bytes`` of a file (the first may be partial); [] if unreadable."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - tail_bytes))
            data = fh.read()
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()


def follow_lines(log_path: Path, exit_path: Path, *, follow: bool, worker: int | None,
                 running: Callable[[], bool], poll_interval: float) -> Iterator[LogLine]:
    """Every line of ``log_path`` (of rank ``worker`` only, if given); with ``follow`` keep
    reading until ``exit_path`` exists (written after the last log line) or ``running()`` says
    the writer is gone."""
    while not log_path.exists():  # the supervisor creates it within milliseconds
        if not follow or exit_path.exists() or not running():
            if not log_path.exists():
                return
            break
        time.sleep(poll_interval)

    def complete_lines(buf: bytes) -> tuple[list[LogLine], bytes]:
        *raws, rest = buf.split(b"\n")
        lines = (to_log_line(raw) for raw in raws)
        return [ln for ln in lines if worker is None or ln.rank == worker], rest

    with open(log_path, "rb") as fh:
        pending = b""
        while True:
            chunk = fh.read(65536)
            if chunk:
                lines, pending = complete_lines(pending + chunk)
                yield from lines
                continue
            if not follow:
                break
            # EOF: finished only once exit.json exists (written after the last log line)
            # or the supervisor is gone; read once more so nothing written meanwhile is lost.
            if exit_path.exists() or not running():
                lines, pending = complete_lines(pending + fh.read())
                yield from lines
                break
            time.sleep(poll_interval)
        if pending:
            line = to_log_line(pending)
            if worker is None or line.rank == worker:
                yield line


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{count} bytes"


def _digest_after(digest_path: Path, offset: int, max_lines: int) -> list[tuple[LogLine, str]]:
    """The digest's lines whose ``job.log`` offset is past ``offset`` (at most ``max_lines``)."""
    try:
        data = digest_path.read_bytes()
    except OSError:
        return []
    out: list[tuple[LogLine, str]] = []
    for raw in data.split(b"\n"):
        at, _, line = raw.partition(b" ")
        if not at.isdigit() or int(at) <= offset:
            continue
        out.append((to_log_line(line), at.decode()))
        if len(out) >= max_lines:
            break
    return out


def _summarised(log_path: Path, offset: int, size: int, max_lines: int, skip_bytes: int) -> LogChunk | None:
    """For a reader more than ``skip_bytes`` behind: the digest's lines after ``offset``, or,
    once they are delivered, one line saying what was left out and a cursor ``TAIL_BYTES``
    before the end. None when the reader is close enough (or there is no digest)."""
    if size - offset <= skip_bytes:
        return None
    digest = log_path.with_name(DIGEST_NAME)
    if not digest.exists():
        return None
    lines = _digest_after(digest, offset, max_lines)
    if lines:
        return LogChunk(lines, lines[-1][1], False)
    with open(log_path, "rb") as fh:  # the tail (shorter than skip_bytes: read on, never summarised again)
        fh.seek(max(offset, size - min(TAIL_BYTES, skip_bytes // 2)))
        fh.readline()
        start = fh.tell()
    note = LogLine(None, f"[lanenb] {_size(start - offset)} of job.log summarised from {DIGEST_NAME} "
                         f"(its events and a sample of steps); reading on from the last {_size(size - start)}",
                   "supervisor", "supervisor")
    return LogChunk([(note, str(start))], str(start), False)


def read_chunk(log_path: Path, cursor: str | None, *, closed: bool, max_lines: int,
               tail_lines: int | None, skip_bytes: int = SKIP_BYTES) -> LogChunk:
    """Seek to byte offset ``cursor`` in ``log_path`` and return the whole lines after it
    (``Backend.read_log``); ``closed``: nothing will be appended any more. A reader more than
    ``skip_bytes`` behind gets the digest and then the tail instead (module docstring).

    Raises:
        SpecError: ``cursor`` is not a byte offset.
    """
    offset = 0
    if cursor:
        try:
            offset = int(cursor)
            if offset < 0:
                raise ValueError
        except ValueError:
            raise SpecError("cursor", cursor, "is not a cursor of a local job's log") from None
    try:
        with open(log_path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if offset > size:  # the log was replaced (run dir reused): start again
                offset = 0
            if not cursor and tail_lines:
                offset = max(0, size - max(64 * 1024, 400 * tail_lines))
            elif (summary := _summarised(log_path, offset, size, max_lines, skip_bytes)) is not None:
                return summary
            fh.seek(offset)
            # bounded: a poll of a long log reads a slice, not the whole rest of the file
            data = fh.read(min(size - offset, READ_LIMIT))
    except FileNotFoundError:  # not created yet
        return LogChunk([], cursor, closed)
    at_eof = offset + len(data) >= size
    # a last line without newline, once nothing more can follow; or a slice without any
    # newline (one line longer than READ_LIMIT), delivered in pieces rather than never
    deliver_rest = (closed and at_eof) or (not at_eof and b"\n" not in data)
    pos = offset
    if not cursor and tail_lines and offset > 0:  # drop the partial first line
        cut = data.find(b"\n") + 1
        data, pos = data[cut:], offset + cut
    lines: list[tuple[LogLine, str]] = []
    for raw in data.split(b"\n")[:-1]:
        pos += len(raw) + 1
        lines.append((to_log_line(raw), str(pos)))
    rest = data[data.rfind(b"\n") + 1:]
    if rest and deliver_rest:
        pos += len(rest)
        lines.append((to_log_line(rest), str(pos)))
    if not cursor and tail_lines:
        lines = lines[-tail_lines:]
    lines = lines[:max_lines]
    end = int(lines[-1][1]) if lines else (offset if cursor or not tail_lines else pos)
    return LogChunk(lines, str(end), closed and end >= size)
