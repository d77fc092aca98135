"""Which rank wrote a line: Open MPI's tag and lanenb's ``[rank] text``, written and read by
one module (``lanenb_trainer.ranktag``), so what the supervisor writes reads back unchanged."""

from __future__ import annotations

import pytest

from lanenb_trainer import ranktag


@pytest.mark.parametrize("rank, stream, text", [
    (0, "stdout", "plain"),
    (12, "stderr", "  File \"train.py\", line 3, in <module>"),  # indentation is part of the line
    (1, "stdout", " "),
    (3, "stdout", "[1,0]<stdout>:looks like a tag"),
    (None, "mpirun", "mpirun noticed that process rank 0 exited"),
])
def test_a_written_line_reads_back_exactly(rank, stream, text):
    written = ranktag.tag_line(rank, stream, text)
    assert written.endswith("\n") and written.count("\n") == 1
    assert ranktag.read_tag(written[:-1]) == (rank, stream, text)


def test_only_a_leading_tag_is_a_tag():
    assert ranktag.read_tag("[host:123] [1,0]<stdout>:x") == (None, "mpirun", "[host:123] [1,0]<stdout>:x")
    assert ranktag.split_rank_tag("[7,2]<stderr>:oops") == (2, "oops")


def test_parser_reassembles_chunks_and_keeps_blank_rank_lines_out_of_mpirun_lines():
    p = ranktag.RankTagParser()
    out = p.feed("[1,0]<stdout>:part one [1,1]<stdout>:whole\n")
    out += p.feed("\n")  # a blank mpirun line is no line
    out += p.feed("[1,0]<stdout>: and two\n")
    out += p.feed("[1,1]<stderr>:open at the end")
    assert out == [(1, "stdout", "whole"), (0, "stdout", "part one  and two"), (1, "stderr", "open at the end")]
    assert p.flush() == []
    p.feed("[1,0]<stdout>:cut[1,1]<stdout>:x\n")
    assert p.flush() == [(0, "stdout", "cut")]


def test_display_line():
    assert ranktag.display_line(2, "hi") == "[2] hi"
    assert ranktag.display_line(None, "hi") == "hi"
    assert ranktag.display_line(None, "hi", "mpirun") == "[mpirun] hi"
