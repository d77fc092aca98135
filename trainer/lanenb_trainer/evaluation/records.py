"""Validation of TuSimple prediction and ground-truth records for the evaluator: the
official tool's error cases, each with a message naming the file, line and frame.

Fast paths first (type checks per record, per lane) so valid files cost little; the
detailed search for *which* value is bad runs only once something failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .jsonl import EvalError, json_type

REQUIRED_PRED_KEYS = ("raw_file", "lanes", "run_time")
REQUIRED_GT_KEYS = ("raw_file", "lanes", "h_samples")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_lanes(loc: str, frame: str, lanes: Any, n_samples: int, role: str) -> None:
    if not isinstance(lanes, list):
        raise EvalError(
            f"{loc}: frame {frame!r}: 'lanes' must be an array of lanes (arrays of x per "
            f"h_sample), got a JSON {json_type(lanes)}"
        )
    for i, lane in enumerate(lanes):
        if not isinstance(lane, list):
            raise EvalError(
                f"{loc}: frame {frame!r}: lane {i} must be an array of x per h_sample, "
                f"got a JSON {json_type(lane)}"
            )
        if len(lane) != n_samples:
            raise EvalError(
                f"{loc}: frame {frame!r}: lane {i} has {len(lane)} points but {role} has "
                f"{n_samples} h_samples (one x per h_sample, -2 where the lane is not visible)"
            )


def find_bad_value(loc: str, frame: str, lanes: Sequence[Sequence[Any]]) -> None:
    """Raise ``EvalError`` at the first x that is not a number: the vectorised path only
    learns that one exists, this names the frame, lane and point."""
    for i, lane in enumerate(lanes):
        for j, x in enumerate(lane):
            if not _is_number(x):
                raise EvalError(
                    f"{loc}: frame {frame!r}: lane {i} point {j} is {x!r} ({json_type(x)}); "
                    "expected a number (x in pixels, negative where the lane is not visible)"
                )


def _lanes_ok(lanes: Any, n_samples: int) -> bool:
    """Fast path of ``_check_lanes`` (the per-lane messages are only built on failure)."""
    return type(lanes) is list and all(type(l) is list and len(l) == n_samples for l in lanes)


def parse_ground_truth(
    gt: Sequence[tuple[int, dict[str, Any]]], src: str
) -> tuple[list[str], list[int], list[tuple[float, ...]], list[list[list[Any]]], dict[str, int], list[str]]:
    """Validate the ground truth; h_samples are interned (one array per distinct list)."""
    raw_files: list[str] = []
    sample_ids: list[int] = []
    sample_sets: dict[tuple[Any, ...], int] = {}
    lanes_all: list[list[list[Any]]] = []
    index: dict[str, int] = {}
    locs: list[str] = []
    for line, rec in gt:
        loc = f"{src}:{line}"
        missing = [k for k in REQUIRED_GT_KEYS if k not in rec]
        if missing:
            raise EvalError(
                f"{loc}: ground-truth frame is missing {', '.join(map(repr, missing))} "
                f"(each line needs {', '.join(REQUIRED_GT_KEYS)})"
            )
        raw = rec["raw_file"]
        if type(raw) is not str:
            raise EvalError(f"{loc}: ground-truth 'raw_file' must be a string, got a JSON {json_type(raw)}")
        if raw in index:
            raise EvalError(
                f"{loc}: ground-truth frame {raw!r} appears twice (first at {locs[index[raw]]})"
            )
        hs = rec["h_samples"]
        if type(hs) is not list:
            raise EvalError(f"{loc}: frame {raw!r}: 'h_samples' must be an array of row numbers, "
                            f"got a JSON {json_type(hs)}")
        key = tuple(hs)
        sid = sample_sets.get(key)
        if sid is None:
            if not hs or not all(_is_number(y) for y in hs):
                raise EvalError(
                    f"{loc}: frame {raw!r}: 'h_samples' must be a non-empty array of row numbers"
                )
            sid = sample_sets[key] = len(sample_sets)
        lanes = rec["lanes"]
        if not _lanes_ok(lanes, len(hs)):
            _check_lanes(loc, raw, lanes, len(hs), "the frame")
        index[raw] = len(raw_files)
        locs.append(loc)
        raw_files.append(raw)
        sample_ids.append(sid)
        lanes_all.append(lanes)
    if not raw_files:
        raise EvalError(f"{src} has no ground-truth frames")
    return raw_files, sample_ids, list(sample_sets), lanes_all, index, locs


def parse_predictions(
    pred: Sequence[tuple[int, dict[str, Any]]],
    src: str,
    gt_src: str,
    gt_index: dict[str, int],
    gt_n_samples: list[int],
) -> tuple[list[list[list[Any]]], np.ndarray, list[str]]:
    """Order predictions like the ground truth; return lanes, run times, locations."""
    n = len(gt_index)
    lanes_by_frame: list[Any] = [None] * n
    run_time = [0.0] * n
    locs: list[str] = [""] * n
    for line, rec in pred:
        missing = [k for k in REQUIRED_PRED_KEYS if k not in rec]
        if missing:
            named = f" (frame {rec['raw_file']!r})" if isinstance(rec.get("raw_file"), str) else ""
            raise EvalError(
                f"{src}:{line}: prediction{named} is missing {', '.join(map(repr, missing))}: "
                f"each line needs raw_file, lanes and run_time"
            )
        raw = rec["raw_file"]
        if type(raw) is not str:
            raise EvalError(f"{src}:{line}: 'raw_file' must be a string, got a JSON {json_type(raw)}")
        f = gt_index.get(raw)
        if f is None:
            raise EvalError(
                f"{src}:{line}: raw_file {raw!r} is not a frame of the test set {gt_src} "
                "(predictions must use the ground truth's raw_file paths)"
            )
        if lanes_by_frame[f] is not None:
            raise EvalError(f"{src}:{line}: second prediction for frame {raw!r} (first at {locs[f]})")
        rt = rec["run_time"]
        if not _is_number(rt) or rt != rt:
            raise EvalError(
                f"{src}:{line}: frame {raw!r}: 'run_time' must be a number of milliseconds, got {rt!r}"
            )
        lanes = rec["lanes"]
        if not _lanes_ok(lanes, gt_n_samples[f]):
            _check_lanes(f"{src}:{line}", raw, lanes, gt_n_samples[f], "the ground truth")
        lanes_by_frame[f] = lanes
        run_time[f] = rt
        locs[f] = f"{src}:{line}"
    if len(pred) != n or None in lanes_by_frame:
        names = [r for r, i in gt_index.items() if lanes_by_frame[i] is None]
        raise EvalError(
            f"{src}: predictions are missing for {len(names)} of {n} test frames, "
            f"e.g. {names[0]!r}: the prediction file needs one line per frame of {gt_src}"
        )
    return lanes_by_frame, np.asarray(run_time, dtype=np.float64), locs


def number_records(records: Sequence[Any], what: str) -> list[tuple[int, dict[str, Any]]]:
    if isinstance(records, (str, bytes, dict)) or not isinstance(records, Sequence):
        raise EvalError(f"{what} must be a list of frame dicts, got {type(records).__name__}")
    out = []
    for i, rec in enumerate(records, start=1):
        if not isinstance(rec, dict):
            if all(hasattr(rec, k) for k in REQUIRED_GT_KEYS):  # e.g. data.labels.LaneRecord
                rec = {k: getattr(rec, k) for k in REQUIRED_GT_KEYS}
            else:
                raise EvalError(f"<{what}>:{i}: expected a frame dict, got {type(rec).__name__}")
        out.append((i, rec))
    return out
