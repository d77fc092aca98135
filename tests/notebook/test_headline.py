"""The headline rule (``lanenb.analysis.headline``) and ``RunState.headline()``: best.pt's test
figure first, the last model's beside it when it is another epoch, each labelled with its model;
the same answer from the events as from ``metrics.json``."""

from __future__ import annotations

import pytest

from lanenb.analysis.headline import from_metrics
from lanenb.analysis.runstate import RunState, fill_tests
from lanenb_trainer.events import format_event, parse_line

LAST = {"accuracy": 0.948, "fp": 0.03, "fn": 0.02, "frames": 32}
BEST = {"accuracy": 0.938, "fp": 0.05, "fn": 0.04, "frames": 32}


def ev(kind: str, **fields):
    return parse_line(format_event(kind, 0, **fields))


def metrics(test_best=BEST, best_epoch=6, epochs=10):
    return {"accuracy": (test_best or LAST)["accuracy"], "test": LAST, "test_best": test_best,
            "best_epoch": best_epoch, "epochs": epochs}


def test_both_models_best_pt_first_the_last_beside_it():
    head = from_metrics(metrics())
    # epochs counted from 1 in the words (best_epoch 6 is the 7th of 10), from 0 in the fields
    assert head.text() == "test acc 0.9380 (best.pt, epoch 7), 0.9480 (last, epoch 10)"
    assert head.short() == "0.9380 test (best.pt, epoch 7); 0.9480 (last, epoch 10)"
    assert head.long() == ("test accuracy 0.9380 FP 0.0500 FN 0.0400 (best.pt, epoch 7; 32 frames); "
                           "last, epoch 10: accuracy 0.9480 FP 0.0300 FN 0.0200")
    d = head.to_dict()
    assert (d["accuracy"], d["label"], d["other"]["label"], d["other"]["accuracy"]) == (
        0.938, "best.pt, epoch 7", "last, epoch 10", 0.948)
    assert (d["epoch"], d["other"]["epoch"]) == (6, 9)


def test_only_the_last_model_is_labelled_as_the_last():
    head = from_metrics(metrics(test_best=None))
    assert head.text() == "test acc 0.9480 (last, epoch 10)" and head.other is None


def test_without_validation_the_headline_is_the_last_models():
    """A --no-val run keeps best.pt by train loss (its ``best`` has no accuracy): an older
    metrics.json that scored it on the test set still heads with the last model."""
    kept_by_train_loss = {**metrics(best_epoch=1, epochs=3), "best": {"epoch": 1, "train_loss": 0.4}}
    head = from_metrics(kept_by_train_loss)
    assert head.text() == "test acc 0.9480 (last, epoch 3)" and head.other is None
    validated = {**metrics(best_epoch=1, epochs=3), "best": {"epoch": 1, "train_loss": 0.4, "accuracy": 0.9}}
    assert from_metrics(validated).label == "best.pt, epoch 2"


def test_best_at_the_last_epoch_is_one_model_shown_once():
    head = from_metrics(metrics(best_epoch=9))
    assert head.text() == "test acc 0.9380 (best.pt, epoch 10)" and head.other is None


def test_no_test_result_no_headline():
    assert from_metrics({"status": "failed", "test": None}) is None and from_metrics(None) is None


@pytest.mark.parametrize("order", [("last", "best"), ("best", "last")])
def test_the_events_give_the_same_headline_as_metrics_json(order):
    state = RunState()
    state.fold(ev("epoch", epoch=0, val_accuracy=0.7))
    assert state.headline().text() == "val acc 0.7000 (epoch 1)"
    for model in order:  # the last model's eval carries the epochs done (10), best.pt's its epoch
        state.fold(ev("eval", split="test", model=model, epoch=10 if model == "last" else 6,
                      **(LAST if model == "last" else BEST)))
    assert state.headline() == from_metrics(metrics())
    assert "test acc 0.9380 (best.pt, epoch 7), 0.9480 (last, epoch 10)" in state.summary()
    assert state.accuracy() == 0.938 and state.test["model"] == "best"
    assert state.to_dict()["headline"]["text"] == from_metrics(metrics()).text()


def test_a_log_without_test_events_takes_the_figures_of_metrics_json():
    state = RunState()
    fill_tests(state, metrics())
    assert state.headline() == from_metrics(metrics()) and state.test["model"] == "best"


def test_a_log_without_validation_heads_with_the_last_model():
    """An older trainer scored a --no-val run's best.pt (kept by train loss) on the test set: the
    events of such a run head with the last model, as its metrics.json does."""
    state = RunState()
    state.fold(ev("start", config={"epochs": 3, "use_val": False}))
    state.fold(ev("eval", split="test", model="last", epoch=3, **LAST))
    state.fold(ev("eval", split="test", model="best", epoch=1, **BEST))
    assert state.headline().text() == "test acc 0.9480 (last, epoch 3)"
