"""Fixtures for the evaluator tests: the real TuSimple labels and the bench baselines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_scripts import load_bench

REPO = Path(__file__).resolve().parents[2]
REAL_DIR = Path(os.environ.get("LANENB_TUSIMPLE_REAL", REPO.parent / "shared" / "tusimple-real"))
REAL_LABELS = REAL_DIR / "label_data_0313.json"


@pytest.fixture(scope="session")
def reference() -> ModuleType:
    """bench/lane_eval_reference.py: the per-point pure-Python LaneEval."""
    return load_bench("lane_eval_reference")


@pytest.fixture(scope="session")
def speed_bench() -> ModuleType:
    """bench/lane_eval_speed.py (its perturbation helpers)."""
    return load_bench("lane_eval_speed")


@pytest.fixture(scope="session")
def real_labels_path() -> Path:
    if not REAL_LABELS.is_file():
        pytest.skip(f"real TuSimple labels not found at {REAL_LABELS} (set LANENB_TUSIMPLE_REAL)")
    return REAL_LABELS


@pytest.fixture(scope="session")
def _real_gt_cached(real_labels_path: Path) -> list[dict[str, Any]]:
    with open(real_labels_path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture()
def real_gt(_real_gt_cached: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A fresh copy per test (tests may mutate it; the file is never touched)."""
    return [
        {**r, "lanes": [list(lane) for lane in r["lanes"]], "h_samples": list(r["h_samples"])}
        for r in _real_gt_cached
    ]


def _write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture()
def write_jsonl():
    """``write_jsonl(path, records)``: one JSON document per line."""
    return _write_jsonl
