"""Running a notebook from ``notebooks/`` writes its data and restored folders next to it
(``quickstart-data/``, ``scaling-data/``, ``restored-<job>/``): they are outputs, and git must
not list them as new files (``notebooks/.gitignore``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = ["notebooks/quickstart-data/labels.json", "notebooks/scaling-data/clips/0/1.jpg",
           "notebooks/restored-lanenb-20260101-abc/metrics.json"]
SOURCES = ["notebooks/01-quickstart.ipynb", "notebooks/05-new.ipynb"]


def _ignored(path: str) -> bool:
    # --no-index: judge the path by the ignore rules alone, whether or not the file exists
    proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, check=False)
    if proc.returncode not in (0, 1):
        pytest.fail(f"git check-ignore {path} failed with exit {proc.returncode}")
    return proc.returncode == 0


@pytest.fixture(autouse=True)
def _git_checkout() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")


@pytest.mark.parametrize("path", OUTPUTS)
def test_notebook_outputs_are_ignored(path: str) -> None:
    assert _ignored(path), f"{path} would show in git status"


@pytest.mark.parametrize("path", SOURCES)
def test_notebooks_themselves_are_not_ignored(path: str) -> None:
    assert not _ignored(path), f"{path} is ignored: a new notebook would not be committed"
