"""The one MPI-as-root environment of the tests.

Open MPI's mpirun refuses to run as root unless both variables are set; the tests run as root in
containers and CI. ``tests/conftest.py`` puts them into ``os.environ`` once for the session; a test
that builds a child's environment from scratch (a browser's server, a pod's container) adds
``MPI_ROOT_ENV`` to it."""

from __future__ import annotations

__all__ = ["MPI_ROOT_ENV"]

MPI_ROOT_ENV: dict[str, str] = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
