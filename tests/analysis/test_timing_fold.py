"""``RunState`` folds ``timing`` events: per rank the latest window, a bounded history, the
host; ``breakdown()`` the time-weighted shares every face draws."""

from __future__ import annotations

import copy
import json

import pytest
from timing_stream import Run, event, fold, window

from lanenb.analysis.runstate import GPU_RECENT, TIMING_HISTORY, RunState


def test_the_latest_window_host_and_device_are_kept_per_rank():
    state = fold([window(0, 10, 100.0, host="node-a", compute_s=0.3, data_s=0.1, exchange_s=0.1),
                  window(1, 10, 100.5, host="node-b", device="cuda:0", compute_s=0.5)])
    assert state.timing[0]["step_s"] == pytest.approx(0.5) and state.timing[0]["data_s"] == pytest.approx(0.1)
    assert state.timing[1]["host"] == "node-b" and state.timing[1]["device"] == "cuda:0"
    assert state.hosts == {0: "node-a", 1: "node-b"} and state.ranks() == [0, 1]


def test_the_history_is_bounded_and_a_window_read_twice_counts_once():
    state = RunState()
    events = [window(0, 10 * i, 100.0 + i, compute_s=0.1 * i, pause_s=0.0) for i in range(1, 8)]
    for e in events + events[-1:]:
        state.fold(e)
    history = state.timing[0]["history"]
    assert [w["step"] for w in history] == [10 * i for i in range(8 - TIMING_HISTORY, 8)]
    assert state.timing[0]["step"] == 70 and state.timing[0]["compute_s"] == pytest.approx(0.7)


def test_pauses_are_totalled_per_rank():
    state = fold([event("timing", 0, 10.0, step=10, steps=10, step_s=0.5, compute_s=0.5, pause_s=4.0,
                        pause=["validation"]),
                  event("timing", 0, 20.0, step=20, steps=10, step_s=0.5, compute_s=0.5, pause_s=1.5,
                        pause=["validation", "checkpoint"])])
    assert state.timing[0]["pause_total_s"] == pytest.approx(5.5)
    assert state.timing[0]["pauses"] == {"validation": 2, "checkpoint": 1}


@pytest.mark.parametrize("fields", [
    {"step": 10, "steps": 0, "step_s": 0.5},
    {"step": 10, "steps": 10, "step_s": None},
    {"step": 10, "steps": 10, "step_s": 0.0},
    {"step": 10, "step_s": 0.5},
])
def test_an_empty_or_broken_window_is_ignored(fields):
    state = fold([event("timing", 0, 10.0, **fields)])
    assert state.timing == {} and state.breakdown() == {}


def test_breakdown_is_time_weighted_and_adds_up_to_one():
    """A 20-step window of 1 s steps weighs four times a 10-step window of 0.5 s steps."""
    state = fold([window(0, 10, 10.0, steps=10, data_s=0.5, step_s=0.5),
                  window(0, 30, 30.0, steps=20, compute_s=0.8, exchange_s=0.1, h2d_s=0.05, optimizer_s=0.05,
                         step_s=1.0)])
    b = state.breakdown()[0]
    total = 0.5 * 10 + 1.0 * 20
    assert b["data"] == pytest.approx(0.5 * 10 / total)
    assert b["compute"] == pytest.approx(0.8 * 20 / total)
    assert b["exchange"] == pytest.approx(0.1 * 20 / total)
    assert b["other"] == pytest.approx(0.1 * 20 / total)
    assert sum(b[p] for p in ("data", "compute", "exchange", "other")) == pytest.approx(1.0)
    assert b["step_s"] == pytest.approx(total / 30)


def test_the_view_state_carries_timing_and_breakdown_as_json():
    state = fold(Run(ranks=2).windows(lambda r, i: {"compute_s": 0.2, "data_s": 0.05}, 4))
    data = json.loads(json.dumps(state.to_dict()))
    assert set(data["breakdown"]) == {"0", "1"} and set(data["timing"]) == {"0", "1"}
    assert "history" not in data["timing"]["0"] and data["timing"]["0"]["host"] == "node-a"
    assert data["breakdown"]["1"]["data"] == pytest.approx(state.breakdown()[1]["data"])
    assert copy.deepcopy(state).breakdown() == state.breakdown()  # a second view starts from a copy


def test_gpu_samples_are_kept_raw_and_bounded():
    state = RunState(max_points=4)
    for k in range(3 * GPU_RECENT):
        state.fold(event("system", 0, t=float(k), gpu_util=float(k % 100), cpu_percent=50.0))
    state.fold(event("system", 1, t=1.0, cpu_percent=50.0))  # a CPU rank has none
    recent = list(state.gpu_recent[0])
    assert len(recent) == GPU_RECENT and recent[-1] == (3.0 * GPU_RECENT - 1, float(3 * GPU_RECENT - 1))
    assert 1 not in state.gpu_recent


def test_rank_zero_start_keeps_the_config_and_every_rank_its_host():
    state = fold([event("start", 0, 1.0, config={"num_workers": 3, "use_workers": True, "batch_size": 8},
                        host="node-a", world_size=2),
                  event("start", 1, 1.0, config={"num_workers": 99}, host="node-b", world_size=2)])
    assert state.config["num_workers"] == 3 and state.hosts == {0: "node-a", 1: "node-b"}


def test_timing_windows_are_not_logged_line_by_line_but_read_in_words_when_asked():
    """Every rank reports a window every few steps: the log pane would drown in them (they are
    the breakdown and the verdict instead); the console's --show-system prints them compactly."""
    from lanenb.analysis.event_text import event_text
    from lanenb.contract.backend import LogLine

    e = event("timing", 1, 10.0, step=20, steps=10, host="node-b", step_s=0.5, data_s=0.2, h2d_s=0.0,
              compute_s=0.25, exchange_s=0.05, optimizer_s=0.0, other_s=0.0, pause_s=3.0, pause=["validation"])
    state = RunState()
    state.fold_line(LogLine(1, "@lanenb {...}", event=e))
    assert state.timing[1]["step"] == 20 and list(state.logs) == []
    assert event_text(e) is None
    assert event_text(e, system=True) == ("timing: step 20 (10 steps) 0.5 s/step on node-b: data 40% h2d 0% "
                                          "compute 50% exchange 10% optimizer 0%, paused 3.0s (validation)")
