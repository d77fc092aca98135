"""The ``local`` backend: ranks under mpirun on this machine, watched by a detached
supervisor process (``supervise.py``) that owns the job's log and exit record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lanenb.plugins import lazy_attributes

if TYPE_CHECKING:
    from lanenb.backends.local.backend import LocalBackend
    from lanenb.backends.local.options import LocalOptions

__all__ = ["LocalBackend", "LocalOptions"]

# imported on first use: the descriptor (descriptor.py) is read by --help and the panel without
# importing the backend
_LAZY = {
    "LocalBackend": "lanenb.backends.local.backend",
    "LocalOptions": "lanenb.backends.local.options",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
