"""The event line format is the contract between ranks and every watcher: pin it down."""

import io
import json

import pytest

from lanenb_trainer import events, ranktag


def test_emit_then_parse_round_trip():
    buf = io.StringIO()
    events.emit("step", 1, stream=buf, epoch=0, step=5, loss=0.25, lr=0.01, images_per_s=12.5)
    line = buf.getvalue()
    assert line.startswith(events.PREFIX) and line.endswith("\n")
    ev = events.parse_line(line)
    assert ev is not None
    assert (ev.kind, ev.rank, ev.v) == ("step", 1, events.SCHEMA_VERSION)
    assert ev["loss"] == 0.25 and ev.get("step") == 5 and ev.get("missing", "d") == "d"
    assert ev.t > 1e9


def test_parse_behind_mpirun_tag_and_split_rank():
    line = events.format_event("eval", 0, accuracy=0.9)
    tagged = "[1,3]<stdout>:" + line
    rank, rest = ranktag.split_rank_tag(tagged)
    assert rank == 3 and rest == line
    assert events.parse_line(tagged).get("accuracy") == 0.9
    assert ranktag.split_rank_tag("plain text") == (None, "plain text")


def test_non_finite_numbers_stay_parseable():
    line = events.format_event("step", 0, loss=float("nan"), grads=[float("inf"), 1.0])
    obj = json.loads(line[len(events.PREFIX):])
    assert obj["loss"] is None and obj["grads"] == [None, 1.0]


@pytest.mark.parametrize("line", [
    "ordinary log line",
    "@lanenb {not json",
    "@lanenb [1, 2]",
    '@lanenb {"rank": 0}',
    '@lanenb {"kind": "step", "rank": "zero"}',
])
def test_garbage_is_ignored_not_raised(line):
    assert events.parse_line(line) is None


def test_unknown_kind_is_refused_at_emit():
    with pytest.raises(ValueError, match="unknown event kind 'stpe'"):
        events.format_event("stpe", 0)


def test_parse_lines_filters():
    lines = ["x", events.format_event("start", 0, world_size=2), "y", events.format_event("end", 0, status="ok")]
    assert [e.kind for e in events.parse_lines(lines)] == ["start", "end"]
