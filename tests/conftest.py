"""Suite-wide setup: the MPI-as-root environment, set once, and the ``process`` marker that keeps
tests starting processes or servers out of the fast tier (``bash scripts/test-fast.sh``).

What counts as starting processes is defined in ``tests/support/fast_tier.py``."""

from __future__ import annotations

import os

import pytest
from fast_tier import PROCESS_MARKER, starts_processes
from mpi_env import MPI_ROOT_ENV

# Open MPI refuses to start as root without these; tests run as root in containers and CI. Set
# here, before any test module is imported, so every mpirun a test starts (directly, through
# `lanenb`, or through the job supervisor) inherits them.
for _name, _value in MPI_ROOT_ENV.items():
    os.environ.setdefault(_name, _value)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marker = getattr(pytest.mark, PROCESS_MARKER)
    for item in items:
        markers = {m.name for m in item.iter_markers()}
        if starts_processes(item.nodeid, getattr(item, "fixturenames", ()), markers):
            item.add_marker(marker)
