"""Fixtures for third-party backends: the toy Slurm plug-in installed the way pip installs one
(a ``.dist-info`` with an ``entry_points.txt`` on ``sys.path``), and the backend registry
restored after each test so the plug-in never leaks into other folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from homes import lanenb_home  # noqa: F401  (autouse: every test gets its own LANENB_HOME)

from lanenb.contract import backends

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Whatever a test registers is gone after it (the registry is module state)."""
    monkeypatch.setattr(backends, "_DESCRIPTORS", dict(backends._DESCRIPTORS))
    monkeypatch.setattr(backends, "_entry_points_loaded", backends._entry_points_loaded)
    yield


@pytest.fixture
def installed_toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``pip install toy-slurm``, as far as lanenb can tell: a dist-info declaring the
    ``lanenb.backends`` entry point, and the package importable."""
    site = tmp_path / "site"
    info = site / "toy_slurm-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-slurm\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[lanenb.backends]\nslurm = toy_slurm:DESCRIPTOR\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(HERE))
    return "slurm"
