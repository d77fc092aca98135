"""Fixtures of the run-doctor fault tests; the faults and the watcher live in ``doctor_support`` (a
uniquely named module: every test folder has a conftest, so tests never ``from conftest import``)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from homes import lanenb_home  # noqa: F401  (autouse: every test gets its own LANENB_HOME)

sys.path.insert(0, str(Path(__file__).parent))



@pytest.fixture(scope="session")
def doctor_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small synthetic TuSimple root for every run of the session."""
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    from doctor_support import make_dataset

    return make_dataset(tmp_path_factory.mktemp("doctor-data"))
