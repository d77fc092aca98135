"""The one isolated ``LANENB_HOME`` of the tests: jobs, runs and snapshots of a test go to a
registry of its own under ``tmp_path``, never the developer's ``~/.lanenb``.

A test folder turns it on for all its tests with ``from homes import lanenb_home  # noqa: F401``
in its conftest (an imported fixture is registered there, autouse included). This is the only
``lanenb_home`` fixture: a folder that needs more (other variables, another working directory, a
ready snapshot store) adds an autouse fixture of its own next to it, never a second definition.

``empty_restic_store`` is the one restic template of the session: ``restic init`` calibrates its
key derivation (~1 s), so a test that needs a fresh repository copies the template instead
(``fresh_restic_store``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

__all__ = ["empty_restic_store", "fresh_restic_store", "isolated_home", "lanenb_home"]


def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``LANENB_HOME`` at ``tmp_path/home`` for this test; returns that path."""
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def lanenb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_home(tmp_path, monkeypatch)


@pytest.fixture(scope="session")
def empty_restic_store(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """One empty restic store (repository and password file) made once per session; None when
    restic is not installed."""
    if shutil.which("restic") is None:
        return None
    from lanenb.snapshots.local import ResticStore

    root = tmp_path_factory.mktemp("restic-template") / "snapshots"
    ResticStore(root)._ensure_repo()
    return root


@pytest.fixture(autouse=True)
def fresh_restic_store(lanenb_home: Path, empty_restic_store: Path | None) -> None:
    """The test's snapshot store (``$LANENB_HOME/snapshots``, where ``ResticStore`` looks by default)
    a fresh copy of the template. Autouse where imported, like ``lanenb_home``:
    ``from homes import empty_restic_store, fresh_restic_store, lanenb_home  # noqa: F401``."""
    if empty_restic_store is not None:
        shutil.copytree(empty_restic_store, lanenb_home / "snapshots")
