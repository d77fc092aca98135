"""From SCNN outputs (per-pixel lane-slot probabilities + lane existence) to TuSimple
predictions: one x per ground-truth ``h_sample`` row, in original-image pixels, or -2.

Why this shape: TuSimple scores x at fixed rows of the *original* image, while the network
sees a resized image (e.g. 288x800 of 1280x720), so every sampled row is mapped into the
probability map, the lane's column is read there (a probability-weighted centre of the
row's peak, which keeps the sub-pixel position the downscale would otherwise lose) and mapped
back. Slots the existence branch rejects, and lanes with fewer than ``min_points`` points,
are dropped so they cannot cost false positives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from lanenb_trainer.data.labels import NO_POINT

__all__ = ["NO_POINT", "batch_to_predictions", "probmaps_to_lanes"]


def _to_numpy(value: Any, name: str) -> np.ndarray:
    if hasattr(value, "detach"):  # torch tensor, without importing torch here
        value = value.detach().float().cpu().numpy()
    try:
        return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array or tensor, got {type(value).__name__}") from None


def _check_size(orig_size: Any) -> tuple[int, int]:
    try:
        h, w = (int(v) for v in orig_size)
        ok = h > 0 and w > 0 and all(float(v) == int(v) for v in orig_size)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"orig_size must be (height, width) in pixels, two positive integers; got {orig_size!r}")
    return h, w


def _check_rows(h_samples: Any) -> np.ndarray:
    try:
        rows = np.asarray(h_samples)
    except (TypeError, ValueError):
        rows = np.asarray([], dtype=object)
    if rows.ndim != 1 or rows.size == 0 or rows.dtype.kind not in "iuf":
        raise ValueError(f"h_samples must be a non-empty list of row numbers, got {h_samples!r:.80}")
    return rows.astype(np.float64)


def probmaps_to_lanes(
    prob: Any,
    exist: Any,
    h_samples: Sequence[int],
    orig_size: tuple[int, int],
    *,
    exist_threshold: float = 0.5,
    prob_threshold: float = 0.3,
    min_points: int = 2,
) -> list[list[int]]:
    """TuSimple lanes (x per h_sample or -2) of one frame, in slot (left-to-right) order.

    ``prob`` is ``[1 + slots, H, W]`` (softmax over background + lane slots; numpy or torch),
    ``exist`` the ``[slots]`` existence probabilities, ``orig_size`` the original ``(h, w)``
    the labels are measured in. A row yields a point when the slot's peak probability on
    that row exceeds ``prob_threshold``; its x is the probability-weighted centre of the
    above-threshold run of pixels around the peak.
    """
    p = _to_numpy(prob, "prob")
    if p.ndim != 3 or p.shape[0] < 2 or p.shape[1] < 1 or p.shape[2] < 1:
        raise ValueError(
            f"prob must have shape [1 + lane slots, H, W] (e.g. [5, 288, 800]), got {list(p.shape)}"
        )
    slots = p.shape[0] - 1
    e = _to_numpy(exist, "exist").reshape(-1)
    if e.shape != (slots,):
        raise ValueError(f"exist must have {slots} values (one per lane slot of prob), got {e.size}")
    if not (0.0 <= exist_threshold <= 1.0) or not (0.0 <= prob_threshold < 1.0):
        raise ValueError(
            "exist_threshold must be in [0, 1] and prob_threshold in [0, 1); got "
            f"{exist_threshold!r} and {prob_threshold!r}"
        )
    if int(min_points) != min_points or min_points < 1:
        raise ValueError(f"min_points must be a positive integer, got {min_points!r}")
    if e.size and (np.nanmin(e) < 0.0 or np.nanmax(e) > 1.0 or np.isnan(e).any()):
        raise ValueError(
            f"exist must be probabilities in [0, 1] (apply a sigmoid to existence logits), "
            f"got values in [{float(np.nanmin(e)):.3g}, {float(np.nanmax(e)):.3g}]"
        )
    lo, hi = float(p.min()), float(p.max())
    if not (lo >= -1e-4 and hi <= 1.0 + 1e-4):
        raise ValueError(
            f"prob must hold probabilities in [0, 1] (apply softmax over the channel dimension "
            f"to the logits), got values in [{lo:.3g}, {hi:.3g}]"
        )
    h, w = _check_size(orig_size)
    ys = _check_rows(h_samples)

    _, H, W = p.shape
    rows = np.rint((ys + 0.5) * (H / h) - 0.5).astype(np.int64)
    row_ok = (ys >= 0) & (ys < h)
    rows = np.clip(rows, 0, H - 1)

    keep = np.flatnonzero(e > exist_threshold)
    if keep.size == 0:
        return []
    band = p[keep + 1][:, rows, :]  # [K, R, W]
    peak = band.argmax(-1)
    peak_val = np.take_along_axis(band, peak[..., None], -1)[..., 0]
    # the lane's column: probability-weighted centre of the run of above-threshold pixels
    # that contains the row's peak (robust to flat one-hot peaks and to a second lane
    # elsewhere on the row)
    above = band > prob_threshold
    col = np.arange(W)
    pk = peak[..., None]
    left = np.where(~above & (col < pk), col, -1).max(-1) + 1
    right = np.where(~above & (col > pk), col, W).min(-1) - 1
    in_run = (col >= left[..., None]) & (col <= right[..., None])
    wts = np.where(in_run, band, 0.0).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        x_map = (wts * col).sum(-1) / wts.sum(-1)
    x = (x_map + 0.5) * (w / W) - 0.5
    valid = (peak_val > prob_threshold) & row_ok[None, :]
    x = np.clip(np.rint(np.where(valid, x, 0.0)), 0, w - 1).astype(np.int64)
    x[~valid] = NO_POINT
    return [lane for lane, n in zip(x.tolist(), valid.sum(-1).tolist()) if n >= min_points]


def batch_to_predictions(
    prob: Any,
    exist: Any,
    raw_files: Sequence[str],
    h_samples: Sequence[int] | Sequence[Sequence[int]],
    orig_sizes: tuple[int, int] | Sequence[tuple[int, int]],
    *,
    run_time_ms: float | Sequence[float],
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """TuSimple submission dicts ``{"raw_file", "lanes", "h_samples", "run_time"}`` for a
    batch ``prob [B, 1 + slots, H, W]``, ``exist [B, slots]``.

    ``h_samples`` and ``orig_sizes`` may be shared by the whole batch or given per frame;
    ``run_time_ms`` is per frame (a batch's forward time divided by its size, say).
    Keyword arguments go to :func:`probmaps_to_lanes`.
    """
    p = _to_numpy(prob, "prob")
    e = _to_numpy(exist, "exist")
    if p.ndim != 4:
        raise ValueError(f"prob must have shape [B, 1 + lane slots, H, W], got {list(p.shape)}")
    B = p.shape[0]
    if e.ndim != 2 or e.shape[0] != B:
        raise ValueError(f"exist must have shape [B={B}, lane slots], got {list(e.shape)}")
    if isinstance(raw_files, str) or len(raw_files) != B:
        raise ValueError(f"raw_files must list one path per frame of the batch ({B}), got {raw_files!r:.80}")
    per_frame_rows = len(h_samples) > 0 and isinstance(h_samples[0], (list, tuple, np.ndarray))
    # isinstance on the first item picks the union's arm, which mypy cannot follow: cast
    rows_list: list[Sequence[int]] = (
        list(cast(Sequence[Sequence[int]], h_samples)) if per_frame_rows else [cast(Sequence[int], h_samples)] * B
    )
    if len(rows_list) != B:
        raise ValueError(f"h_samples must be one list for the batch or one per frame ({B}), got {len(rows_list)}")
    per_frame_size = len(orig_sizes) > 0 and isinstance(orig_sizes[0], (list, tuple, np.ndarray))
    sizes: list[tuple[int, int]] = (
        list(cast(Sequence[tuple[int, int]], orig_sizes)) if per_frame_size else [cast(tuple[int, int], orig_sizes)] * B
    )
    if len(sizes) != B:
        raise ValueError(f"orig_sizes must be one (h, w) for the batch or one per frame ({B}), got {len(sizes)}")
    if isinstance(run_time_ms, (int, float)):
        times = [float(run_time_ms)] * B
    else:
        times = [float(t) for t in run_time_ms]
        if len(times) != B:
            raise ValueError(f"run_time_ms must be one number or one per frame ({B}), got {len(times)}")
    if any(not np.isfinite(t) or t < 0 for t in times):
        raise ValueError(f"run_time_ms must be non-negative milliseconds, got {run_time_ms!r}")
    out = []
    for i in range(B):
        lanes = probmaps_to_lanes(p[i], e[i], rows_list[i], sizes[i], **kwargs)
        out.append(
            {
                "raw_file": raw_files[i],
                "lanes": lanes,
                "h_samples": [int(v) for v in rows_list[i]],
                "run_time": times[i],
            }
        )
    return out
