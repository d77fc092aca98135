"""Fixtures for the data-layer tests: real TuSimple frames/labels and tiny dataset builders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "tusimple-real"
if not REAL.is_dir():
    REAL = Path("/work/shared/tusimple-real")
REAL_LABELS = REAL / "label_data_0313.json"
REAL_FRAMES = REAL / "frames_512x288"


def write_jpeg(path: Path, h: int, w: int, seed: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)
    ok, buf = cv2.imencode(".jpg", img)
    assert ok
    path.write_bytes(buf.tobytes())


def frame(raw: str, lanes=None, h_samples=None) -> dict:
    hs = h_samples if h_samples is not None else [240, 250, 260]
    lanes = lanes if lanes is not None else [[100, 110, 120], [500, 490, 480]]
    return {"lanes": lanes, "h_samples": hs, "raw_file": raw}


def make_root(root: Path, files: dict[str, list], images: dict[str, tuple[int, int]] | None = None
              ) -> Path:
    """Label files from dicts (JSON-dumped) or raw strings (written verbatim), plus images."""
    root.mkdir(parents=True, exist_ok=True)
    for name, lines in files.items():
        text = "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)
        (root / name).write_text(text)
    for raw, (h, w) in (images or {}).items():
        write_jpeg(root / raw, h, w)
    return root


@pytest.fixture(scope="session")
def real_root(tmp_path_factory) -> Path:
    """The 10 real frames upscaled to 1280x720 with their unchanged official labels."""
    root = tmp_path_factory.mktemp("real")
    for p in REAL_FRAMES.glob("clips/*/*/20.jpg"):
        q = root / p.relative_to(REAL_FRAMES)
        q.parent.mkdir(parents=True, exist_ok=True)
        img = cv2.resize(cv2.imread(str(p)), (1280, 720), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(q), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
    shutil.copy(REAL_FRAMES / "labels.json", root / "label_data_real.json")
    return root


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory) -> Path:
    from lanenb_trainer.data.synth import synthesize

    root = tmp_path_factory.mktemp("synth") / "ds"
    synthesize(root, 12, seed=3, width=640, height=360, progress=False)
    return root
