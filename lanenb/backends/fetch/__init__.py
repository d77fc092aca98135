"""The ``kubernetes-fetch`` backend: a batch/v1 Job that downloads a dataset into a PVC,
recorded and watched like any lanenb job (``spec.py`` its spec, ``objects.py`` its
Kubernetes objects, ``backend.py`` the backend)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lanenb.plugins import lazy_attributes

if TYPE_CHECKING:
    from lanenb.backends.fetch.backend import KubernetesFetchBackend
    from lanenb.backends.fetch.spec import FetchSpec

__all__ = ["KubernetesFetchBackend", "FetchSpec"]

# imported on first use: the descriptor (descriptor.py) is read by --help and the panel without
# importing the ``kubernetes`` client
_LAZY = {
    "KubernetesFetchBackend": "lanenb.backends.fetch.backend",
    "FetchSpec": "lanenb.backends.fetch.spec",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
