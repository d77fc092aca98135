"""The official LaneEval rules, one at a time, on hand-built frames whose scores follow
directly from the rule (expected values computed here from the rule's definition)."""

from __future__ import annotations

import math

import pytest

from lanenb_trainer.evaluation import evaluate

ROWS = list(range(100, 300, 10))  # 20 h_samples


def frame(name: str, gt_lanes, h=ROWS):
    return {"raw_file": name, "lanes": gt_lanes, "h_samples": list(h)}


def pred(name: str, lanes, run_time=10.0):
    return {"raw_file": name, "lanes": lanes, "run_time": run_time}


def vertical(x: float, n: int = len(ROWS)) -> list[float]:
    return [x] * n


def score(gt_lanes, pred_lanes, run_time=10.0, h=ROWS):
    res = evaluate([pred("a", pred_lanes, run_time)], [frame("a", gt_lanes, h)])
    f = res.frames[0]
    assert (res.accuracy, res.fp, res.fn) == (f.accuracy, f.fp, f.fn)
    return f


def test_perfect_prediction_scores_one():
    f = score([vertical(500), vertical(800)], [vertical(800), vertical(500)])
    assert (f.accuracy, f.fp, f.fn, f.matched) == (1.0, 0.0, 0.0, 2)
    assert f.best_pred == (1, 0)
    assert f.lane_accuracy == (1.0, 1.0)


@pytest.mark.parametrize("offset, hit", [(19, True), (19.999, True), (20, False), (-20, False), (-19.5, True)])
def test_vertical_lane_threshold_is_strictly_20px(offset, hit):
    f = score([vertical(500)], [vertical(500 + offset)])
    assert f.lane_accuracy == ((1.0 if hit else 0.0),)
    assert f.fn == (0.0 if hit else 1.0)
    assert f.fp == (0.0 if hit else 1.0)


def test_threshold_grows_with_the_lane_angle():
    # x = 2*y + c: slope k = 2, threshold 20 / cos(atan 2) = 20 * sqrt(5) ~ 44.72 px
    gt = [2 * y - 100 for y in ROWS]
    limit = 20 / math.cos(math.atan(2.0))
    inside = math.floor(limit)  # 44
    assert score([gt], [[x + inside for x in gt]]).lane_accuracy == (1.0,)
    assert score([gt], [[x + inside + 1 for x in gt]]).lane_accuracy == (0.0,)
    # the same 44 px offset fails on a vertical lane: the threshold really depends on angle
    assert score([vertical(500)], [vertical(500 + inside)]).lane_accuracy == (0.0,)


def test_angle_is_fitted_on_visible_gt_points_only():
    # steep visible part (k = 3) hidden behind -2 points that would otherwise flatten the fit
    gt = [-2] * 10 + [3 * (y - 200) + 300 for y in ROWS[10:]]
    limit = 20 * math.sqrt(1 + 9)  # 63.2
    shifted = [x + 63 if x >= 0 else -2 for x in gt]
    assert score([gt], [shifted]).lane_accuracy == (1.0,)
    shifted = [x + 64 if x >= 0 else -2 for x in gt]
    assert score([gt], [shifted]).lane_accuracy == (0.5,)  # only the 10 both-invisible rows
    assert limit == pytest.approx(63.2456, abs=1e-4)


def test_invisible_points_are_minus_100_on_both_sides():
    gt = [-2] * 4 + [500] * 16
    # both invisible: a hit; pred invisible where gt visible: a miss
    f = score([gt], [[-7] * 4 + [500] * 13 + [-2] * 3])
    assert f.lane_accuracy == (17 / 20,)
    # a predicted x of 0..19 where gt is invisible (-100) is > 20 px away: a miss
    f = score([gt], [[5] * 4 + [500] * 16])
    assert f.lane_accuracy == (16 / 20,)


@pytest.mark.parametrize("hits, matched", [(17, True), (16, False)])
def test_point_ratio_085_decides_matching(hits, matched):
    p = [500] * hits + [900] * (20 - hits)
    f = score([vertical(500)], [p])
    assert f.lane_accuracy == (hits / 20,)
    assert f.matched == int(matched)
    assert f.fn == (0.0 if matched else 1.0)
    assert f.fp == (0.0 if matched else 1.0)
    assert f.accuracy == hits / 20  # accuracy counts points even when the lane is not matched


@pytest.mark.parametrize("run_time, penalised", [(200, False), (200.01, True), (1e6, True)])
def test_run_time_over_200ms_scores_0_0_1(run_time, penalised):
    f = score([vertical(500)], [vertical(500)], run_time=run_time)
    if penalised:
        assert (f.accuracy, f.fp, f.fn) == (0.0, 0.0, 1.0)
        assert "run_time" in f.penalty
    else:
        assert (f.accuracy, f.fp, f.fn, f.penalty) == (1.0, 0.0, 0.0, None)


def test_more_than_gt_plus_two_lanes_scores_0_0_1():
    gt = [vertical(300), vertical(600)]
    ok = score(gt, gt + [vertical(900), vertical(1000)])  # 4 = 2 + 2: still scored
    assert (ok.accuracy, ok.fp, ok.fn) == (1.0, 0.5, 0.0)
    bad = score(gt, gt + [vertical(900), vertical(1000), vertical(1100)])  # 5 > 2 + 2
    assert (bad.accuracy, bad.fp, bad.fn) == (0.0, 0.0, 1.0)
    assert bad.penalty == "5 predicted lanes > 2 gt lanes + 2"


def test_more_than_four_gt_lanes_forgives_one_miss_and_drops_worst_lane():
    gt = [vertical(x) for x in (100, 300, 500, 700, 900)]
    f = score(gt, gt[:4])
    assert (f.accuracy, f.fp, f.fn) == (1.0, 0.0, 0.0)  # (4 + 0 - 0) / 4, fn 1 - 1
    gt6 = gt + [vertical(1100)]
    f = score(gt6, gt6[:4])
    assert (f.accuracy, f.fp, f.fn) == (1.0, 0.0, 0.25)  # fn (2 - 1) / min(6, 4)
    # lane accuracies 1, 1, 1, 0.5, 0: the worst (0) is dropped, two misses become one
    preds = gt[:3] + [[700] * 10 + [-2] * 10]
    f = score(gt, preds)
    assert f.lane_accuracy == (1.0, 1.0, 1.0, 0.5, 0.0)
    assert (f.accuracy, f.fp, f.fn) == (3.5 / 4, 1 / 4, 1 / 4)


def test_one_prediction_may_match_two_gt_lanes_so_fp_can_be_negative():
    f = score([vertical(500), vertical(510)], [vertical(505)])
    assert f.matched == 2
    assert f.fp == -1.0  # (1 - 2) / 1, as the official tool computes it
    assert (f.accuracy, f.fn) == (1.0, 0.0)


def test_empty_prediction_and_empty_ground_truth():
    f = score([vertical(500)], [])
    assert (f.accuracy, f.fp, f.fn, f.best_pred) == (0.0, 0.0, 1.0, (-1,))
    f = score([], [])
    assert (f.accuracy, f.fp, f.fn) == (0.0, 0.0, 0.0)
    f = score([], [vertical(500)])
    assert (f.accuracy, f.fp, f.fn) == (0.0, 1.0, 0.0)


def test_totals_are_means_over_ground_truth_frames_in_any_prediction_order():
    gts = [frame(n, [vertical(500)]) for n in ("a", "b", "c", "d")]
    preds = [
        pred("d", [vertical(500)], run_time=500),  # penalised
        pred("c", []),
        pred("b", [vertical(900)]),
        pred("a", [vertical(500)]),
    ]
    res = evaluate(preds, gts)
    assert [f.raw_file for f in res.frames] == ["a", "b", "c", "d"]
    assert res.accuracy == pytest.approx(1 / 4)
    assert res.fp == pytest.approx(1 / 4)  # only b
    assert res.fn == pytest.approx(3 / 4)  # b, c, d
    assert res.summary() == {"accuracy": res.accuracy, "fp": res.fp, "fn": res.fn}


def test_frames_with_different_h_samples_conventions():
    rows160 = list(range(160, 720, 10))  # 56 rows
    rows240 = list(range(240, 720, 10))  # 48 rows
    gts = [frame("old", [vertical(500, 48)], rows240), frame("new", [vertical(500, 56)], rows160)]
    preds = [pred("old", [vertical(510, 48)]), pred("new", [vertical(560, 56)])]
    res = evaluate(preds, gts)
    assert [(f.accuracy, f.fn) for f in res.frames] == [(1.0, 0.0), (0.0, 1.0)]


def test_per_frame_dict_is_json_ready():
    f = score([vertical(500)], [vertical(900), vertical(505)])
    d = f.to_dict()
    assert d["raw_file"] == "a" and d["best_pred"] == [1] and d["lane_accuracy"] == [1.0]
    assert d["num_gt"] == 1 and d["num_pred"] == 2 and d["penalty"] is None
    assert d["fp"] == 0.5


def test_ground_truth_objects_with_label_attributes_are_accepted():
    from dataclasses import dataclass

    @dataclass
    class Record:  # the shape of lanenb_trainer.data.labels.LaneRecord
        raw_file: str
        lanes: list
        h_samples: list

    res = evaluate([pred("a", [vertical(505)])], [Record("a", [vertical(500)], ROWS)])
    assert (res.accuracy, res.fp, res.fn) == (1.0, 0.0, 0.0)


def test_worst_frames_for_a_viewer():
    gts = [frame(n, [vertical(500), vertical(900)]) for n in "abc"]
    preds = [pred("a", [vertical(500), vertical(900)]), pred("b", []), pred("c", [vertical(500)])]
    res = evaluate(preds, gts)
    assert [f.raw_file for f in res.worst(2)] == ["b", "c"]
    assert res.worst(0) == [] and len(res.worst(10)) == 3


def test_runtime_rule_can_be_left_to_the_submission():
    """Validation on a slow host scores the lanes (runtime_rule=False); the official rule stays
    the default for submissions and lanenb eval."""
    from lanenb_trainer.evaluation.lane_eval import evaluate

    h = list(range(160, 720, 10))
    lane = [100 + i for i in range(len(h))]
    gt = [{"raw_file": "a.jpg", "lanes": [lane], "h_samples": h}]
    slow = [{"raw_file": "a.jpg", "lanes": [lane], "run_time": 900.0}]
    assert evaluate(slow, gt).accuracy == 0.0  # official: too slow scores (0, 0, 1)
    lanes_only = evaluate(slow, gt, runtime_rule=False)
    assert lanes_only.accuracy == 1.0 and lanes_only.fp == 0.0 and lanes_only.fn == 0.0


def test_the_test_figure_scores_the_lanes_and_says_the_official_200_ms_rule_beside_it():
    """On a busy machine half the frames of a good model took over 200 ms and the headline read
    0.47 for a model of 0.95: the headline is the lanes' score, the official rule is said beside it."""
    from lanenb_trainer.evaluation.headline import LAST, figure
    from lanenb_trainer.evaluation.lane_eval import test_scores

    gts = [frame(f"f{i}", [vertical(500), vertical(800)]) for i in range(4)]
    preds = [pred(f"f{i}", [vertical(500), vertical(800)], run_time=t) for i, t in enumerate([20, 250, 30, 400])]
    scores = test_scores(preds, gts)
    assert (scores["accuracy"], scores["fp"], scores["fn"], scores["frames"]) == (1.0, 0.0, 0.0, 4)
    assert (scores["official_accuracy"], scores["official_fn"], scores["over_time_frames"]) == (0.5, 0.5, 2)
    assert (scores["latency_ms_p50"], scores["latency_ms_p95"]) == (250.0, 400.0)
    found = figure(LAST, scores, epoch=3)
    assert found.realtime == "2/4 frames over the 200 ms real-time limit (median 250 ms); official score 0.5000"
    assert figure(LAST, test_scores(preds[:1], gts[:1])).realtime == ""  # nothing over the limit: nothing to say
    assert found.to_dict()["official_accuracy"] == 0.5 and found.to_dict()["over_time_frames"] == 2
