"""``LogLine``: the one type of a line of job output, from mpirun's pipe to the log pane.

Every reader makes these (``iter_output`` on mpirun's output, the local backend on
``job.log``, the Kubernetes backend on the launcher pod's log) and every consumer takes them
(``Job.poll``, ``RunState``, the console, the log panes), so a line's rank, stream and
``@lanenb`` event are worked out in one place.

A line's event is parsed from its text the first time someone asks for it and kept: a line
is JSON-parsed at most once on its way to the reducer, and never by code that does not look
(the local supervisor, which only copies lines into ``job.log``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from lanenb_trainer.events import Event, parse_line
from lanenb_trainer.ranktag import RankTagParser, display_line

__all__ = ["LogLine", "TaggedOutputParser", "iter_output", "looks_like_error"]


class _Unparsed(enum.Enum):
    TOKEN = enum.auto()  # "parse text when asked": distinct from None, "no event on this line"


def looks_like_error(text: str) -> bool:
    """A plain line a view should highlight: a traceback's first line, an error message
    (``ERROR ...``, ``...Error: ...``, mpirun's ``... error: ...``), never an event line."""
    t = text.lstrip()
    return (t.startswith(("Traceback (most recent call last)", "ERROR", "Error:", "RuntimeError"))
            or ("error:" in t[:80].lower() and not t.startswith("@lanenb")))


@dataclass(frozen=True, init=False, slots=True)
class LogLine:
    """One whole line of job output.

    Args:
        rank: the rank that wrote it; None for the launcher's own output (mpirun, the local
            supervisor, a fetch pod).
        text: the line, without tag or newline.
        source: who produced the log it was read from (``"launcher"``, ``"supervisor"``,
            ``"fetch"``).
        stream: ``"stdout"``/``"stderr"`` of a rank; ``"mpirun"`` for an untagged line.
        event: the line's ``@lanenb`` event when the caller already knows it (the log pane's
            summaries, whose text is not the event's JSON); by default parsed from ``text``
            on first use of :attr:`event`.
    """

    rank: int | None
    text: str
    source: str
    stream: str
    _event: Event | _Unparsed | None = field(init=False, repr=False, compare=False)

    def __init__(self, rank: int | None, text: str, source: str = "launcher", stream: str = "stdout",
                 event: Event | _Unparsed | None = _Unparsed.TOKEN) -> None:
        object.__setattr__(self, "rank", rank)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "stream", stream)
        object.__setattr__(self, "_event", event)

    @property
    def event(self) -> Event | None:
        """The ``@lanenb`` event on this line, or None; parsed once, then kept."""
        event = self._event
        if event is _Unparsed.TOKEN:
            event = parse_line(self.text)
            object.__setattr__(self, "_event", event)
        return event

    @property
    def error(self) -> bool:
        """What a view highlights: an ``error`` event, or a plain line that looks like an error."""
        event = self.event
        return event.kind == "error" if event is not None else looks_like_error(self.text)

    def tagged(self) -> str:
        """The line as the console prints it: ``[rank] text``, ``[mpirun] text`` without a rank."""
        return display_line(self.rank, self.text, "mpirun")

    def __str__(self) -> str:
        return display_line(self.rank, self.text)


class TaggedOutputParser:
    """Raw ``--tag-output`` lines in, whole :class:`LogLine` objects out (Open MPI's chunked
    tags are put back together by ``lanenb_trainer.ranktag.RankTagParser``)."""

    def __init__(self, source: str = "launcher") -> None:
        self.source = source
        self._tags = RankTagParser()

    def feed(self, raw: str) -> list[LogLine]:
        return [LogLine(rank, text, self.source, stream) for rank, stream, text in self._tags.feed(raw)]

    def flush(self) -> list[LogLine]:
        return [LogLine(rank, text, self.source, stream) for rank, stream, text in self._tags.flush()]


def iter_output(stream: Iterable[str], source: str = "launcher") -> Iterator[LogLine]:
    """Whole lines with their rank from mpirun's (merged) output."""
    parser = TaggedOutputParser(source)
    for raw in stream:
        yield from parser.feed(raw)
    yield from parser.flush()
