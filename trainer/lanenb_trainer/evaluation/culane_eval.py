"""The official CULane evaluation: F1 of lanes matched at IoU > 0.5, lanes drawn 30 px wide.

What the official tool (``tools/lane_evaluation`` of the SCNN repository) does, step by step:

1. each lane (annotation or prediction, ``x y x y ...`` in 1640x590 frame pixels) with more
   than 2 points is resampled by a natural cubic spline through its points, parametrised by
   chord length, 50 samples per segment (``Spline::splineInterpTimes``);
2. the resampled polyline is drawn with ``cv::line`` 30 px thick on a 590x1640 canvas
   (points rounded to the nearest pixel, as ``Point2f -> Point``);
3. IoU of every (annotation, prediction) pair = overlapping pixels / union;
4. a maximum-weight bipartite matching (Hungarian) on the IoU matrix; a matched pair with IoU
   strictly above the threshold (0.5) is a true positive; FP = predictions - TP,
   FN = annotations - TP, summed over frames; precision, recall, F1 from the sums.

A missing prediction file counts as a frame without predicted lanes, as in the official tool.
Matching uses ``scipy.optimize.linear_sum_assignment`` when SciPy is installed, otherwise an
exact bitmask dynamic programme (same optimum; frames have a handful of lanes).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from ..data.culane import CULANE_SIZE, lines_path, parse_lines, read_list
from ..data.labels import LabelError
from .jsonl import EvalError

__all__ = ["CULaneCounts", "CULaneResult", "interp_lane", "lane_mask", "lane_ious", "match_lanes",
           "evaluate_culane", "LANE_WIDTH", "IOU_THRESHOLD"]

LANE_WIDTH = 30
IOU_THRESHOLD = 0.5


def interp_lane(points: np.ndarray, times: int = 50) -> np.ndarray:
    """Natural cubic spline through ``points`` (chord-length parameter), ``times`` samples per
    segment plus the last point; 2-point lanes are returned as they are (a straight line)."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    n = len(pts)
    if n <= 2:
        return pts
    h = np.hypot(*np.diff(pts, axis=0).T)  # segment lengths
    if np.any(h == 0):  # repeated points: drop them, as a spline cannot pass twice at t
        keep = np.concatenate([[True], h > 0])
        return interp_lane(pts[keep], times)
    # second derivatives M (natural: M0 = Mn = 0) from the tridiagonal system, x and y at once
    a = np.zeros((n, n))
    rhs = np.zeros((n, 2))
    a[0, 0] = a[-1, -1] = 1.0
    for i in range(1, n - 1):
        a[i, i - 1], a[i, i], a[i, i + 1] = h[i - 1], 2 * (h[i - 1] + h[i]), h[i]
        rhs[i] = 6 * ((pts[i + 1] - pts[i]) / h[i] - (pts[i] - pts[i - 1]) / h[i - 1])
    m = np.linalg.solve(a, rhs)
    out = []
    for j in range(n - 1):
        t = (h[j] / times) * np.arange(times)[:, None]
        b = (pts[j + 1] - pts[j]) / h[j] - h[j] * (2 * m[j] + m[j + 1]) / 6
        c, d = m[j] / 2, (m[j + 1] - m[j]) / (6 * h[j])
        out.append(pts[j] + b * t + c * t ** 2 + d * t ** 3)
    out.append(pts[-1:])
    return np.concatenate(out)


def lane_mask(points: np.ndarray, shape: tuple[int, int] = CULANE_SIZE, width: int = LANE_WIDTH) -> np.ndarray:
    """bool[h, w]: the lane resampled and drawn ``width`` px thick (the official rendering)."""
    canvas = np.zeros(shape, np.uint8)
    pts = np.rint(interp_lane(points)).astype(np.int64)
    for p, q in itertools.pairwise(pts):
        cv2.line(canvas, (int(p[0]), int(p[1])), (int(q[0]), int(q[1])), 1, width)
    return canvas.astype(bool)


def lane_ious(gt: Sequence[np.ndarray], pred: Sequence[np.ndarray], shape: tuple[int, int] = CULANE_SIZE,
              width: int = LANE_WIDTH) -> np.ndarray:
    """float[len(gt), len(pred)] IoU matrix; a lane with fewer than 2 points has IoU 0."""
    def flat(lanes):
        return [lane_mask(l, shape, width).ravel() if len(l) >= 2 else None for l in lanes]

    g, p = flat(gt), flat(pred)
    out = np.zeros((len(g), len(p)))
    for i, a in enumerate(g):
        for j, b in enumerate(p):
            if a is not None and b is not None:
                union = np.count_nonzero(a | b)
                out[i, j] = np.count_nonzero(a & b) / union if union else 0.0
    return out


def _max_weight_matching(w: np.ndarray) -> list[tuple[int, int]]:
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:  # pragma: no cover - exercised by test via _dp_matching directly
        return _dp_matching(w)
    rows, cols = linear_sum_assignment(w, maximize=True)
    return list(zip(rows.tolist(), cols.tolist()))


def _dp_matching(w: np.ndarray) -> list[tuple[int, int]]:
    """Exact maximum-weight matching by dynamic programming over subsets of columns."""
    transpose = w.shape[1] > w.shape[0]
    m = w.T if transpose else w  # rows >= cols: every column gets a row
    n_rows, n_cols = m.shape
    best: dict[int, tuple[float, list[tuple[int, int]]]] = {0: (0.0, [])}
    for r in range(n_rows):
        nxt = dict(best)
        for mask, (score, pairs) in best.items():
            for c in range(n_cols):
                if not mask & (1 << c):
                    key = mask | (1 << c)
                    cand = score + m[r, c]
                    if key not in nxt or cand > nxt[key][0]:
                        nxt[key] = (cand, pairs + [(r, c)])
        best = nxt
    pairs = max(best.values(), key=lambda v: v[0])[1]
    return [(c, r) for r, c in pairs] if transpose else pairs


@dataclass
class CULaneCounts:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    frames: int = 0

    def add(self, tp: int, fp: int, fn: int) -> None:
        self.tp, self.fp, self.fn, self.frames = self.tp + tp, self.fp + fp, self.fn + fn, self.frames + 1

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def to_dict(self) -> dict:
        return {"tp": self.tp, "fp": self.fp, "fn": self.fn, "frames": self.frames,
                "precision": self.precision, "recall": self.recall, "f1": self.f1}


@dataclass
class CULaneResult(CULaneCounts):
    """Totals plus one :class:`CULaneCounts` per category (``list/test_split/*.txt``)."""

    categories: dict[str, CULaneCounts] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "categories": {k: v.to_dict() for k, v in self.categories.items()}}


def match_lanes(gt: Sequence[np.ndarray], pred: Sequence[np.ndarray], *, iou_threshold: float = IOU_THRESHOLD,
                width: int = LANE_WIDTH, shape: tuple[int, int] = CULANE_SIZE) -> tuple[int, int, int]:
    """(TP, FP, FN) of one frame."""
    if not gt or not pred:
        return 0, len(pred), len(gt)
    ious = lane_ious(gt, pred, shape, width)
    tp = sum(1 for i, j in _max_weight_matching(ious) if ious[i, j] > iou_threshold)
    return tp, len(pred) - tp, len(gt) - tp


def _read(path: Path) -> list[np.ndarray]:
    try:
        return parse_lines(path.read_text(encoding="utf-8"), str(path))
    except LabelError as exc:
        raise EvalError(str(exc)) from None


def evaluate_culane(root: str | os.PathLike, predictions: str | os.PathLike, *,
                    list_file: str = "list/test.txt", iou_threshold: float = IOU_THRESHOLD,
                    width: int = LANE_WIDTH, shape: tuple[int, int] = CULANE_SIZE,
                    categories: bool = True) -> CULaneResult:
    """Score the ``.lines.txt`` files under ``predictions`` (same relative paths as the frames)
    against ``root``'s labels for the frames of ``list_file``.

    Raises:
        EvalError: a list or label file is missing or malformed (names the file and line).
    """
    root, predictions = Path(root), Path(predictions)
    if not (root / list_file).is_file():
        raise EvalError(f"list file not found: {root / list_file}")
    if not predictions.is_dir():
        raise EvalError(f"predictions folder not found: {predictions}")
    try:
        frames = [raw for raw, _, _ in read_list(root, list_file)]
    except LabelError as exc:
        raise EvalError(str(exc)) from None
    per_frame: dict[str, tuple[int, int, int]] = {}
    result = CULaneResult()
    for raw in frames:
        gt_file = lines_path(root, raw)
        if not gt_file.is_file():
            raise EvalError(f"annotation not found: {gt_file} (frame {raw} of {list_file})")
        pred_file = lines_path(predictions, raw)
        pred = _read(pred_file) if pred_file.is_file() else []
        per_frame[raw] = match_lanes(_read(gt_file), pred, iou_threshold=iou_threshold, width=width, shape=shape)
        result.add(*per_frame[raw])
    split_dir = root / "list" / "test_split"
    if categories and split_dir.is_dir():
        for f in sorted(split_dir.glob("*.txt")):
            counts = CULaneCounts()
            for raw, _, _ in read_list(root, str(f.relative_to(root))):
                if raw in per_frame:
                    counts.add(*per_frame[raw])
            result.categories[f.stem] = counts
    return result
