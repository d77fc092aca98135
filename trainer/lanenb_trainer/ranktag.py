"""Which rank wrote a line: the two tag formats, written and read in this module only.

* Open MPI's ``--tag-output`` tag, ``[job,rank]<stdout>:text``: how mpirun hands over rank
  output, and how the local supervisor keeps it in ``job.log`` (so any process that re-reads
  the file tells the ranks apart exactly as a live reader of mpirun does).
* lanenb's ``[rank] text``: how a person reads a line (console, log panes).

Here rather than in ``lanenb`` because the trainer's own multi-host launcher reads the tags
too, and ``lanenb_trainer`` never imports ``lanenb``. Stdlib only.

Why a stateful parser and not ``line.split``: Open MPI forwards rank output in chunks of at
most ~4 KiB and tags every chunk, so one long line of rank 0 can arrive as
``[1,0]<stdout>:part1`` ... ``[1,1]<stdout>:other line`` ... ``[1,0]<stdout>:part2``.
:class:`RankTagParser` puts whole lines back together per rank and stream.
"""

from __future__ import annotations

import re

__all__ = ["MPIRUN_STREAM", "RankTagParser", "display_line", "mpi_tag", "read_tag", "split_rank_tag", "tag_line"]

# "[jobid,rank]<stdout>:" as Open MPI writes it before each (chunk of a) rank line
_MPI_TAG = re.compile(r"\[\d+,(\d+)\]<(stdout|stderr)>:")
MPIRUN_STREAM = "mpirun"  # the stream of a line without a tag: the launcher's own output


def mpi_tag(rank: int, stream: str = "stdout") -> str:
    """Open MPI's tag for a line of ``rank`` on ``stream`` (job id 1, as a single mpirun has)."""
    return f"[1,{int(rank)}]<{stream}>:"


def tag_line(rank: int | None, stream: str, text: str) -> str:
    """One ``job.log`` line (newline included): a rank's line tagged as Open MPI tags it, so
    :func:`read_tag` gives back exactly ``(rank, stream, text)``; an untagged line as it is."""
    return f"{text}\n" if rank is None else f"{mpi_tag(rank, stream)}{text}\n"


def read_tag(line: str) -> tuple[int | None, str, str]:
    """``(rank, stream, text)`` of one whole line that may start with Open MPI's tag;
    ``(None, "mpirun", line)`` for a line without one."""
    m = _MPI_TAG.match(line)
    if m is None:
        return None, MPIRUN_STREAM, line
    return int(m.group(1)), m.group(2), line[m.end():]


def split_rank_tag(line: str) -> tuple[int | None, str]:
    """Strip Open MPI's ``[job,rank]<stdout>:`` tag; return (rank or None, rest)."""
    rank, _stream, text = read_tag(line)
    return rank, text


def display_line(rank: int | None, text: str, unranked: str | None = None) -> str:
    """lanenb's ``[rank] text``; a line without a rank is ``[unranked] text``, or just
    ``text`` when ``unranked`` is None."""
    if rank is None:
        return text if unranked is None else f"[{unranked}] {text}"
    return f"[{rank}] {text}"


class RankTagParser:
    """Raw ``--tag-output`` lines in, whole ``(rank, stream, text)`` lines out (see the module
    docstring); ``rank`` is None (stream ``"mpirun"``) for mpirun's own messages."""

    def __init__(self) -> None:
        self._partial: dict[tuple[int, str], str] = {}

    def feed(self, raw: str) -> list[tuple[int | None, str, str]]:
        """The lines ``raw`` (one line as read from mpirun) completes; blank untagged lines are dropped."""
        raw = raw.rstrip("\n").rstrip("\r")
        tags = list(_MPI_TAG.finditer(raw))
        if not tags:
            return [(None, MPIRUN_STREAM, raw)] if raw.strip() else []
        out: list[tuple[int | None, str, str]] = []
        head = raw[: tags[0].start()]
        if head.strip():
            out.append((None, MPIRUN_STREAM, head))
        for i, m in enumerate(tags):
            key = (int(m.group(1)), m.group(2))
            end = tags[i + 1].start() if i + 1 < len(tags) else len(raw)
            text = self._partial.pop(key, "") + raw[m.end():end]
            if i + 1 < len(tags):
                self._partial[key] = text  # chunk ended mid-line; more of it comes later
            else:
                out.append((key[0], key[1], text.rstrip("\r")))
        return out

    def flush(self) -> list[tuple[int | None, str, str]]:
        """Lines still open when the output ended, as they are."""
        out: list[tuple[int | None, str, str]] = [(r, s, t) for (r, s), t in self._partial.items() if t]
        self._partial.clear()
        return out
