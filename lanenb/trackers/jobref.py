"""A run named the way every lanenb API takes one: a ``Job`` or a job name."""

from __future__ import annotations

from typing import Any

from lanenb.errors import UserError
from lanenb.jobs import Job, get_job

__all__ = ["job_of"]


def job_of(run: Job | str, *, registry: Any = None) -> Job:
    """The ``Job`` for ``run``.

    Args:
        run: a ``Job`` (returned by ``%lanetrain``, ``submit``, ``get_job``) or a job name.
        registry: the job registry to look names up in (default the one under ``LANENB_HOME``).

    Raises:
        JobNotFoundError: no job of that name.
        UserError: ``run`` is neither a Job nor a name.
    """
    if isinstance(run, Job):
        return run
    if isinstance(run, str) and run.strip():
        return get_job(run.strip(), registry=registry)
    raise UserError(f"run={run!r}: expected a Job or a job name (%lanejobs / lanenb jobs list show them)")
