"""Fixtures of the load tests: an isolated ``LANENB_HOME`` (jobs are recorded by
``load_jobs.record_job``, in tests/support)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def lanenb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    return home
