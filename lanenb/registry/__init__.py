"""The job registry: one SQLite database under ``$LANENB_HOME`` recording every job (spec,
backend handle, status, final metrics) and the snapshots linked to it."""

from lanenb.registry.jobs import JobExistsError, JobNotFoundError, JobRecord, JobRegistry

__all__ = ["JobRegistry", "JobRecord", "JobExistsError", "JobNotFoundError"]
