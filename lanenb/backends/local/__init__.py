"""The ``local`` backend: ranks under mpirun on this machine, watched by a detached
supervisor process (``supervise.py``) that owns the job's log and exit record."""

from lanenb.backends.local.backend import LocalBackend

__all__ = ["LocalBackend"]
