"""The ``kubernetes-fetch`` backend: a batch/v1 Job that downloads a dataset into a PVC,
recorded and watched like any lanenb job (``spec.py`` its spec, ``objects.py`` its
Kubernetes objects, ``backend.py`` the backend)."""

from lanenb.backends.fetch.backend import KubernetesFetchBackend
from lanenb.backends.fetch.spec import FetchSpec

__all__ = ["KubernetesFetchBackend", "FetchSpec"]
