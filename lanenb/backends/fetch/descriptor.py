"""The ``kubernetes-fetch`` backend's descriptor: dataset fetch Jobs, recorded as jobs but not a
place to train (``trains=False``). Imports neither the backend nor the ``kubernetes`` client."""

from __future__ import annotations

from lanenb.contract.descriptor import BackendDescriptor

__all__ = ["DESCRIPTOR"]

DESCRIPTOR = BackendDescriptor("kubernetes-fetch", "lanenb.backends.fetch.backend:KubernetesFetchBackend",
                               trains=False)
