"""Fixtures of the server-extension tests: a real Jupyter server (pytest-jupyter) with the
lanenb extension enabled, over an isolated ``LANENB_HOME``."""

from __future__ import annotations

import shutil

import pytest
from homes import lanenb_home  # noqa: F401  (autouse: every test gets its own LANENB_HOME)

# pytest-jupyter's fixtures and its coroutine-test hooks, imported here rather than named in
# ``pytest_plugins`` (which pytest only allows in the root conftest, where they would wrap
# every test of the suite): conftest hooks and fixtures apply to this folder alone.
from pytest_jupyter.jupyter_core import *  # noqa: F403
from pytest_jupyter.jupyter_server import *  # noqa: F403


@pytest.fixture
def jp_server_config():
    return {"ServerApp": {"jpserver_extensions": {"lanenb": True}}}


@pytest.fixture
def mpirun() -> None:
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")


@pytest.fixture
def scripted_cleanup():
    yield
    from lanenb.contract.backends import unregister_backend

    unregister_backend("scripted")
