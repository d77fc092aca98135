"""Lane slots and segmentation masks, the SCNN way.

SCNN predicts a fixed number of lane *slots* (4 on TuSimple) plus background, so every lane
of a frame must land in a slot that means the same thing on every frame. The rule (as in the
SCNN TuSimple convention, slots counted from the ego lane outward):

* each lane's **bottom crossing** is its x at the image's bottom row, taken from its lowest
  labelled point and linearly extrapolated from its lowest labelled points when the lane
  stops above the bottom (lanes that leave through the side extrapolate outside the image);
* lanes crossing left of the image centre are *left* lanes, the others *right* lanes;
* the left lane nearest the centre goes to slot 2 (ego-left), the next one out to slot 1;
  the right lane nearest the centre to slot 3 (ego-right), the next one to slot 4;
* further lanes on a side (a 5th lane, or a 3rd lane on one side) are dropped.

Mask class ids: ``0`` background, ``1..4`` = slots 1..4. A horizontal flip mirrors the
slots (1<->4, 2<->3); :func:`mirror_slots` does that, so the slots are assigned once on the
original geometry and stay consistent whatever augmentation follows.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

__all__ = [
    "NUM_SLOTS",
    "bottom_crossing",
    "assign_slots",
    "mirror_slots",
    "lane_runs",
    "render_mask",
    "existence",
    "existence_from_points",
    "default_thickness",
]

NUM_SLOTS = 4
_SHIFT = 3  # fixed-point bits for sub-pixel polylines


def bottom_crossing(lane: Sequence[int], h_samples: Sequence[int], bottom_y: float) -> float | None:
    """x where the lane meets row ``bottom_y`` (extrapolated); ``None`` if it has no point."""
    xs = np.asarray(lane, dtype=np.float64)
    ys = np.asarray(h_samples, dtype=np.float64)
    valid = xs >= 0
    if not valid.any():
        return None
    xs, ys = xs[valid], ys[valid]
    if len(xs) == 1:
        return float(xs[0])
    order = np.argsort(ys)
    xs, ys = xs[order][-5:], ys[order][-5:]  # the lowest points describe the bottom best
    dy = ys - ys.mean()
    denom = float(dy @ dy)
    if denom == 0:
        return float(xs[-1])
    slope = float(dy @ (xs - xs.mean())) / denom  # least-squares line x(y)
    return float(xs.mean() + slope * (bottom_y - ys.mean()))


def assign_slots(lanes: Sequence[Sequence[int]], h_samples: Sequence[int],
                 width: int, height: int) -> list[int]:
    """Slot index (0..3) for each lane, or -1 when the lane is dropped / has no points."""
    centre = (width - 1) / 2.0
    left: list[tuple[float, int]] = []
    right: list[tuple[float, int]] = []
    for i, lane in enumerate(lanes):
        bx = bottom_crossing(lane, h_samples, height - 1)
        if bx is None:
            continue
        (left if bx < centre else right).append((bx, i))
    slots = [-1] * len(lanes)
    for rank, (_, i) in enumerate(sorted(left, reverse=True)[:2]):
        slots[i] = 1 - rank
    for rank, (_, i) in enumerate(sorted(right)[:2]):
        slots[i] = 2 + rank
    return slots


def mirror_slots(slots: Sequence[int]) -> list[int]:
    return [NUM_SLOTS - 1 - s if s >= 0 else -1 for s in slots]


def lane_runs(lane: Sequence[int], h_samples: Sequence[int]) -> list[np.ndarray]:
    """Contiguous runs of labelled points as float (N, 2) arrays of (x, y); gaps split runs."""
    xs = np.asarray(lane, dtype=np.float64)
    ys = np.asarray(h_samples, dtype=np.float64)
    valid = xs >= 0
    runs: list[np.ndarray] = []
    start = None
    for j, v in enumerate(np.append(valid, False)):
        if v and start is None:
            start = j
        elif not v and start is not None:
            runs.append(np.stack([xs[start:j], ys[start:j]], axis=1))
            start = None
    return runs


def default_thickness(width: int) -> int:
    """16 px at 800 px wide (the SCNN TuSimple setting), scaled with the output width."""
    return max(1, int(round(16 * width / 800)))


def render_mask(slot_runs: Sequence[tuple[int, Sequence[np.ndarray]]], height: int, width: int,
                thickness: int | None = None) -> np.ndarray:
    """uint8 mask (0 bg, 1..4) from ``(slot, [runs of output-space (x, y) points])``.

    Strokes have flat ends: each run is drawn only on the rows between its first and last
    point. OpenCV's thick lines end in round caps that reach ``thickness / 2`` beyond a lane's
    end, and the post-processing then reads a lane point on a row where the label has none
    (rendering the real TuSimple labels and reading them back scored 0.926 with caps, 0.982
    without: ``tests/evaluation/test_target_roundtrip.py``). Drawing into the row band of the
    run (a view, no copy) clips the caps.
    """
    mask = np.zeros((height, width), np.uint8)
    thickness = default_thickness(width) if thickness is None else thickness
    for slot, runs in slot_runs:
        if slot < 0:
            continue
        for r in runs:
            if not len(r):
                continue
            r = np.asarray(r, dtype=np.float64)
            y0 = max(0, int(np.ceil(r[:, 1].min() - 0.5)))  # rows whose centre is within half a pixel
            y1 = min(height - 1, int(np.floor(r[:, 1].max() + 0.5)))
            if y1 < y0:
                continue
            band = mask[y0:y1 + 1]
            pts = np.round((r - (0.0, y0)) * (1 << _SHIFT)).astype(np.int32).reshape(-1, 1, 2)
            cv2.polylines(band, [pts], False, slot + 1, thickness, cv2.LINE_8, _SHIFT)
    return mask


def existence(mask: np.ndarray) -> np.ndarray:
    """float32[4]: 1 where a slot has any pixel in the mask (exact, for checks and tests)."""
    counts = np.bincount(mask.ravel(), minlength=NUM_SLOTS + 1)
    return (counts[1:NUM_SLOTS + 1] > 0).astype(np.float32)


def existence_from_points(slot_runs: Sequence[tuple[int, Sequence[np.ndarray]]], height: int,
                          width: int, thickness: int) -> np.ndarray:
    """float32[4]: 1 where a slot has a lane point within ``thickness / 2`` of the frame.

    Equals :func:`existence` of the rendered mask except for a lane that only clips a corner
    between two consecutive points, and costs microseconds instead of a pass over the mask.
    """
    out = np.zeros(NUM_SLOTS, np.float32)
    r = thickness / 2.0
    for slot, runs in slot_runs:
        if slot < 0 or out[slot]:
            continue
        for run in runs:
            if len(run) and np.any((run[:, 0] > -r) & (run[:, 0] < width - 1 + r)
                                   & (run[:, 1] > -r) & (run[:, 1] < height - 1 + r)):
                out[slot] = 1.0
                break
    return out
