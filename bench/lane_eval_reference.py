"""Baseline: the official TuSimple LaneEval algorithm written out point by point in plain
Python (loops, ``math``), kept to check and to time ``lanenb_trainer.evaluation`` against.

It follows ``evaluate/lane.py`` of TuSimple/tusimple-benchmark step by step, with the
least-squares slope in closed form instead of scikit-learn. It does no input validation
beyond the official "Format of lanes" check: feed it valid records only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the plain-Python baseline needs no numpy; only the official cost model imports it
    import numpy as np

PIXEL_THRESH = 20.0
POINT_THRESH = 0.85


def lane_angle(xs: Sequence[float], ys: Sequence[float]) -> float:
    px = [x for x in xs if x >= 0]
    py = [y for x, y in zip(xs, ys) if x >= 0]
    n = len(px)
    if n <= 1:
        return 0.0
    x_mean = sum(px) / n
    y_mean = sum(py) / n
    num = 0.0
    den = 0.0
    for x, y in zip(px, py):
        num += (y - y_mean) * (x - x_mean)
        den += (y - y_mean) * (y - y_mean)
    k = num / den if den > 0 else 0.0
    return math.atan(k)


def line_accuracy(pred: Sequence[float], gt: Sequence[float], thresh: float) -> float:
    hits = 0
    for p, g in zip(pred, gt):
        p = p if p >= 0 else -100
        g = g if g >= 0 else -100
        if abs(p - g) < thresh:
            hits += 1
    return hits / len(gt)


def _frame_scores(line_accs: list[float], matched: float, fn: float, n_pred: int, n_gt: int
                  ) -> tuple[float, float, float]:
    """The tail of ``LaneEval.bench`` shared by both baselines: the >4-lane rule and the ratios."""
    fp = n_pred - matched
    if n_gt > 4 and fn > 0:
        fn -= 1
    s = sum(line_accs)
    if n_gt > 4:
        s -= min(line_accs)
    return (
        float(s / max(min(4.0, n_gt), 1.0)),
        fp / n_pred if n_pred > 0 else 0.0,
        fn / max(min(n_gt, 4.0), 1.0),
    )


def bench_frame(
    pred: list[list[float]], gt: list[list[float]], y_samples: list[float], run_time: float
) -> tuple[float, float, float]:
    """One frame's (accuracy, fp, fn), as ``LaneEval.bench``."""
    for p in pred:
        if len(p) != len(y_samples):
            raise ValueError("Format of lanes error.")
    if run_time > 200 or len(gt) + 2 < len(pred):
        return 0.0, 0.0, 1.0
    line_accs = []
    fn = 0.0
    matched = 0.0
    for x_gts in gt:
        thresh = PIXEL_THRESH / math.cos(lane_angle(x_gts, y_samples))
        max_acc = 0.0
        for x_preds in pred:
            acc = line_accuracy(x_preds, x_gts, thresh)
            if acc > max_acc:
                max_acc = acc
        if max_acc < POINT_THRESH:
            fn += 1
        else:
            matched += 1
        line_accs.append(max_acc)
    return _frame_scores(line_accs, matched, fn, len(pred), len(gt))


def evaluate_reference(
    pred_records: list[dict[str, Any]], gt_records: list[dict[str, Any]]
) -> tuple[float, float, float, dict[str, tuple[float, float, float]]]:
    """(accuracy, fp, fn, per-frame scores by raw_file) averaged over the gt frames."""
    if len(pred_records) != len(gt_records):
        raise ValueError("We do not get the predictions of all the test tasks")
    gts = {g["raw_file"]: g for g in gt_records}
    accuracy = fp = fn = 0.0
    per_frame = {}
    for pred in pred_records:
        gt = gts[pred["raw_file"]]
        a, p, n = bench_frame(pred["lanes"], gt["lanes"], gt["h_samples"], pred["run_time"])
        per_frame[pred["raw_file"]] = (a, p, n)
        accuracy += a
        fp += p
        fn += n
    num = len(gts)
    return accuracy / num, fp / num, fn / num, per_frame


# ----------------------------------------------------------------------------------------
# The official tool's cost model: numpy arrays built per (gt lane, predicted lane) pair and a
# least-squares fit per gt lane (scikit-learn's LinearRegression centres the data and calls
# a LAPACK least-squares solver; np.linalg.lstsq on centred data does the same). Timed by
# the bench to show the speed-up over the official script, which cannot run unchanged here
# (Python 2, ujson). With scikit-learn installed the fit is its LinearRegression, as there.


def _angle_lstsq(xs: np.ndarray, ys: np.ndarray) -> float:
    import numpy as np

    vis = xs >= 0
    xs, ys = xs[vis], ys[vis]
    if len(xs) <= 1:
        return 0.0
    try:
        from sklearn.linear_model import LinearRegression
    except ImportError:
        yc = (ys - ys.mean())[:, None]
        k = np.linalg.lstsq(yc, xs - xs.mean(), rcond=None)[0][0]
    else:
        k = LinearRegression().fit(ys[:, None], xs).coef_[0]
    return float(np.arctan(k))


def official_fit_backend() -> str:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return "numpy lstsq (install scikit-learn for the official LinearRegression)"
    return "scikit-learn LinearRegression"


def bench_frame_numpy(pred, gt, y_samples, run_time):
    import numpy as np

    if any(len(p) != len(y_samples) for p in pred):
        raise ValueError("Format of lanes error.")
    if run_time > 200 or len(gt) + 2 < len(pred):
        return 0.0, 0.0, 1.0
    ys = np.array(y_samples, dtype=np.float64)
    threshs = [PIXEL_THRESH / np.cos(_angle_lstsq(np.array(g, dtype=np.float64), ys)) for g in gt]
    line_accs, fn, matched = [], 0.0, 0.0
    for g, thresh in zip(gt, threshs):
        accs = []
        for p in pred:
            pa = np.array([v if v >= 0 else -100 for v in p])
            ga = np.array([v if v >= 0 else -100 for v in g])
            accs.append(np.sum(np.where(np.abs(pa - ga) < thresh, 1.0, 0.0)) / len(ga))
        max_acc = np.max(accs) if accs else 0.0
        if max_acc < POINT_THRESH:
            fn += 1
        else:
            matched += 1
        line_accs.append(max_acc)
    return _frame_scores(line_accs, matched, fn, len(pred), len(gt))


def evaluate_official_style(pred_records, gt_records):
    """(accuracy, fp, fn) with the official tool's per-lane numpy structure."""
    gts = {g["raw_file"]: g for g in gt_records}
    accuracy = fp = fn = 0.0
    for pred in pred_records:
        gt = gts[pred["raw_file"]]
        a, p, n = bench_frame_numpy(pred["lanes"], gt["lanes"], gt["h_samples"], pred["run_time"])
        accuracy += a
        fp += p
        fn += n
    num = len(gts)
    return accuracy / num, fp / num, fn / num
