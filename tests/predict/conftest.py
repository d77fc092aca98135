"""A small model trained for real (2 ranks, a few steps) that the predict/export tests use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """(dataset root, run dir) of a 2-rank ddp run at 64x128."""
    from lanenb_trainer.data.synth import synthesize

    base = tmp_path_factory.mktemp("predict")
    data = base / "data"
    synthesize(data, 24, seed=0, width=320, height=180, test_fraction=0.25, progress=False)
    run = base / "run"
    proc = subprocess.run([sys.executable, "-m", "lanenb", "train", "--data", str(data), "--processes", "2",
                           "--engine", "ddp", "--epochs", "2", "--batch-size", "2", "--img-height", "64",
                           "--img-width", "128", "--run-dir", str(run), "--no-val"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "LANENB_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return data, run
