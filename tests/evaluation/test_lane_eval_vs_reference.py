"""The vectorised evaluator agrees exactly with the per-point reference implementation of
the official algorithm on the real TuSimple labels under random perturbations."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lanenb_trainer.evaluation import evaluate
from lanenb_trainer.evaluation.lane_eval import _thresholds

TOL = 1e-9


def assert_same(vec, ref):
    acc, fp, fn, per_frame = ref
    assert len(per_frame) == len(vec.frames)
    for f in vec.frames:
        a, p, n = per_frame[f.raw_file]
        assert f.accuracy == pytest.approx(a, abs=TOL), f.raw_file
        assert f.fp == pytest.approx(p, abs=TOL), f.raw_file
        assert f.fn == pytest.approx(n, abs=TOL), f.raw_file
    assert vec.accuracy == pytest.approx(acc, abs=TOL)
    assert vec.fp == pytest.approx(fp, abs=TOL)
    assert vec.fn == pytest.approx(fn, abs=TOL)


def to_160_convention(rec):
    """The same frame labelled on 160..710 (8 more rows on top, no lane there)."""
    rec["h_samples"] = list(range(160, 240, 10)) + rec["h_samples"]
    rec["lanes"] = [[-2] * 8 + lane for lane in rec["lanes"]]
    return rec


@pytest.mark.parametrize("seed", [0, 1])
def test_agrees_with_reference_on_perturbed_real_labels(seed, real_gt, reference, speed_bench):
    rng = random.Random(seed)
    gt = speed_bench.add_gt_lanes(real_gt, rng, fraction=0.25)  # frames with 5 and 6 lanes
    for rec in gt[::7]:
        to_160_convention(rec)  # both h_sample conventions in one file
    pred = speed_bench.perturb(gt, rng)
    # the perturbation covers every special case of the official rules
    assert any(len(g["lanes"]) > 4 for g in gt)
    assert any(p["lanes"] == [] for p in pred)
    assert any(p["run_time"] > 200 for p in pred)
    assert any(len(p["lanes"]) > len(g["lanes"]) + 2 for p, g in zip(pred, gt))
    vec = evaluate(pred, gt)
    assert_same(vec, reference.evaluate_reference(pred, gt))
    assert 0.3 < vec.accuracy < 0.95  # a real mix of hits and misses, not a degenerate case


@pytest.mark.parametrize("kind", ["int", "float", "huge"])
def test_integer_float_and_out_of_range_paths_agree(kind, real_gt, reference, speed_bench):
    rng = random.Random(7)
    gt = real_gt[:600]
    pred = speed_bench.perturb(gt, rng)
    for p in pred:
        if kind == "int":
            p["lanes"] = [[int(round(x)) for x in lane] for lane in p["lanes"]]
        elif kind == "float":
            p["lanes"] = [[float(x) + 0.25 for x in lane] for lane in p["lanes"]]
        elif p["lanes"]:
            p["lanes"][0][0] = 10**7  # far outside any image: must not wrap around
    assert_same(evaluate(pred, gt), reference.evaluate_reference(pred, gt))


def test_gt_as_prediction_scores_perfectly_on_real_labels(real_gt):
    pred = [{"raw_file": r["raw_file"], "lanes": r["lanes"], "run_time": 5} for r in real_gt]
    res = evaluate(pred, real_gt)
    assert (res.accuracy, res.fp, res.fn) == (1.0, 0.0, 0.0)
    assert len(res.frames) == 2858


def test_closed_form_slope_matches_least_squares(real_gt):
    gt = real_gt[:300]
    x = np.array([r["lanes"] for r in gt], dtype=np.float64)  # [F, 4, 48]
    y = np.array([r["h_samples"] for r in gt], dtype=np.float64)
    visible = x >= 0
    got = _thresholds(x, visible, y)
    for f in range(len(gt)):
        for g in range(x.shape[1]):
            m = visible[f, g]
            if m.sum() > 1:
                k = np.polyfit(y[f][m], x[f, g][m], 1)[0]
                assert got[f, g] == pytest.approx(20 / np.cos(np.arctan(k)), rel=1e-9)
            else:
                assert got[f, g] == 20.0


def test_closed_form_slope_matches_sklearn_linear_regression(real_gt):
    linear_model = pytest.importorskip("sklearn.linear_model")
    gt = real_gt[:100]
    x = np.array([r["lanes"] for r in gt], dtype=np.float64)
    y = np.array([r["h_samples"] for r in gt], dtype=np.float64)
    got = _thresholds(x, x >= 0, y)
    for f in range(len(gt)):
        for g in range(x.shape[1]):
            m = x[f, g] >= 0
            if m.sum() > 1:
                k = linear_model.LinearRegression().fit(y[f][m][:, None], x[f, g][m]).coef_[0]
                assert got[f, g] == pytest.approx(20 / np.cos(np.arctan(k)), rel=1e-12)


def test_agrees_with_the_official_per_lane_numpy_structure(real_gt, reference, speed_bench):
    """Same totals as the official tool's structure (numpy per lane pair, scikit-learn's
    LinearRegression when installed, numpy least squares otherwise)."""
    rng = random.Random(11)
    gt = speed_bench.add_gt_lanes(real_gt[:150], rng, fraction=0.3)
    pred = speed_bench.perturb(gt, rng)
    acc, fp, fn = reference.evaluate_official_style(pred, gt)
    res = evaluate(pred, gt)
    assert (res.accuracy, res.fp, res.fn) == pytest.approx((acc, fp, fn), abs=TOL)
