"""The charts continue the same curves and mark each resume: from one event sequence (a 2-rank run
killed mid-epoch, resumed with 3 steps taken again, then preempted and resumed on 1 rank with
more loader workers), ``RunState`` keeps one mark per resume and one point per step and epoch,
``chartdata`` turns the marks into the ``resumes`` rows, and every progress panel's spec draws
them as dashed rules, the same spec the notebook and the sidebar draw."""

from __future__ import annotations

import math

import pytest
from timing_stream import event

from lanenb.analysis import chartdata
from lanenb.analysis.runstate import RunState
from lanenb.charts import specs

PER_EPOCH = 50


def _launch(state: RunState, ranks: int, workers: int, t: float) -> None:
    for rank in range(ranks):
        state.fold(event("start", rank, t, config={"batch_size": 4, "num_workers": workers, "use_workers": True,
                                                     "epochs": 4}, world_size=ranks, steps_per_epoch=PER_EPOCH,
                         total_steps=4 * PER_EPOCH, host="node-a", engine="ddp", device="cpu"))


def _steps(state: RunState, first: int, last: int, t: float) -> None:
    """Step events (as rank 0 emits them, a deterministic run: the same loss for a step taken
    again) and the epoch event at each epoch's last step."""
    for step in range(first, last + 1):
        state.fold(event("step", 0, t + step, step=step, epoch=(step - 1) // PER_EPOCH, loss=2 * math.exp(-step / 80),
                         lr=0.01, images_per_s=40.0))
        if step % PER_EPOCH == 0:
            state.fold(event("epoch", 0, t + step, epoch=step // PER_EPOCH - 1, step=step, train_loss=1.0,
                             val_accuracy=0.5 + step / 1000, val_fp=0.2, val_fn=0.2))


def _interrupted_run() -> RunState:
    state = RunState()
    _launch(state, ranks=2, workers=2, t=0.0)
    _steps(state, 1, 53, 0.0)  # epoch 0 ended (its event out), killed before the epoch's checkpoint
    _launch(state, ranks=2, workers=2, t=100.0)
    state.fold(event("resumed", 0, 100.0, count=1, step=47, epoch=0, reached=53, steps_lost=6, steps_lost_total=6,
                     preempted=False, automatic=True))
    _steps(state, 48, 130, 100.0)  # steps 48-53 and epoch 0's end taken again
    state.fold(event("preempted", 0, 240.0, step=130, epoch=2, epoch_step=30, steps_per_epoch=PER_EPOCH, ranks=[1]))
    _launch(state, ranks=1, workers=6, t=300.0)
    state.fold(event("resumed", 0, 300.0, count=2, step=130, epoch=2, reached=130, steps_lost=0, steps_lost_total=6,
                     preempted=True, automatic=False,
                     resized={"from": 2, "to": 1, "batch_from": 4, "batch_to": 4, "accumulation": 2,
                              "lr_rule": None, "lr_factor": 1.0, "global_batch": 8}))
    _steps(state, 131, 200, 300.0)
    return state


def test_each_resume_is_a_rule_row_whose_label_says_what_it_cost():
    rows = chartdata.run_rows(_interrupted_run())["resumes"]
    assert [(r["step"], r["kind"], r["label"]) for r in rows] == [
        (47, "resume", "resumed: 6 steps lost"),
        (130, "resize", "resumed: 0 steps lost; resized 2 -> 1 ranks; loader workers 2 -> 6"),
    ]
    # on the validation panel's axis epoch n's point sits at its end: step 130 is 60% into epoch 3
    assert [r["epoch"] for r in rows] == [pytest.approx(47 / PER_EPOCH), pytest.approx(130 / PER_EPOCH)]
    assert len({r["k"] for r in rows}) == 2


def test_a_log_read_twice_keeps_one_mark_per_resume():
    state = _interrupted_run()
    state.fold(event("resumed", 0, 300.0, count=2, step=130, epoch=2, steps_lost=0, steps_lost_total=6,
                     preempted=True))
    assert [r["step"] for r in chartdata.run_rows(state)["resumes"]] == [47, 130]
    assert "1 step lost" in chartdata.resume_rows(_one_step_lost())[0]["label"]


def _one_step_lost() -> RunState:
    state = RunState()
    _launch(state, ranks=2, workers=2, t=0.0)
    _steps(state, 1, 11, 0.0)
    state.fold(event("resumed", 0, 50.0, count=1, step=10, epoch=0, steps_lost=1, steps_lost_total=1))
    return state


def test_steps_and_epochs_taken_again_after_a_kill_are_one_point_each():
    rows = chartdata.run_rows(_interrupted_run(), chartdata.STATIC_LIMIT)
    loss = [r["step"] for r in rows["loss"] if r["series"] == "loss"]
    assert loss == list(range(1, 201))  # one line: no step twice, none missing
    accuracy = [r["epoch"] for r in rows["validation"] if r["metric"] == "accuracy"]
    assert accuracy == [1, 2, 3, 4]  # epoch 1 ended twice (the kill came before its checkpoint)
    assert len({r["k"] for r in rows["validation"]}) == len(rows["validation"])


def test_a_run_never_resumed_has_no_rules():
    state = RunState()
    _launch(state, ranks=2, workers=2, t=0.0)
    _steps(state, 1, 20, 0.0)
    assert chartdata.run_rows(state)["resumes"] == []


@pytest.mark.parametrize("name, x", [("loss", "step"), ("validation", "epoch"), ("throughput", "step")])
def test_every_progress_panel_draws_the_resumes_as_dashed_rules_with_their_label(name, x):
    spec = specs.panel(name)
    layers = [layer for layer in spec["layer"] if layer.get("data") == {"name": specs.RESUMES}]
    assert len(layers) == 1, "one rule layer reading the resumes dataset"
    rule, marker = layers[0]["layer"]
    assert rule["mark"]["type"] == "rule" and rule["mark"]["strokeDash"]
    assert rule["encoding"]["x"]["field"] == x and "y" not in rule["encoding"]  # the whole height
    assert {"field": "label", "title": "resume"} in rule["encoding"]["tooltip"]
    assert {"field": "label", "title": "resume"} in marker["encoding"]["tooltip"]


def test_the_static_image_draws_the_rules_from_the_same_rows():
    state = _interrupted_run()
    rows = chartdata.run_rows(state, chartdata.STATIC_LIMIT)
    with_rules = chartdata.run_png(chartdata.run_specs(state), rows)
    without = chartdata.run_png(chartdata.run_specs(state), {**rows, specs.RESUMES: []})
    assert with_rules.startswith(b"\x89PNG") and with_rules != without
