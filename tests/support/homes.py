"""The one isolated ``LANENB_HOME`` of the tests: jobs, runs and snapshots of a test go to a
registry of its own under ``tmp_path``, never the developer's ``~/.lanenb``.

A test folder turns it on for all its tests with ``from homes import lanenb_home  # noqa: F401``
in its conftest (an imported fixture is registered there, autouse included); a folder that needs
more (other variables, another working directory) defines its own ``lanenb_home`` on top of
:func:`isolated_home`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

__all__ = ["isolated_home", "lanenb_home"]


def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``LANENB_HOME`` at ``tmp_path/home`` for this test; returns that path."""
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def lanenb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_home(tmp_path, monkeypatch)
