"""The job registry: one SQLite database under ``$LANENB_HOME`` recording every job (spec,
backend handle, status, final metrics) and the snapshots linked to it; ``repair`` rebuilds a
damaged one, ``filesystem`` says whether it sits on a network filesystem."""

from lanenb.registry.jobs import JobExistsError, JobNotFoundError, JobRecord, JobRegistry, RegistryDamagedError

__all__ = ["JobRegistry", "JobRecord", "JobExistsError", "JobNotFoundError", "RegistryDamagedError"]
