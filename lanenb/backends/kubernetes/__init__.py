"""The ``kubernetes`` backend: a Kubeflow MPIJob per run (``manifests.py`` builds it,
``status.py`` reads it back in words, ``backend.py`` submits, follows and cancels it)."""

from lanenb.backends.kubernetes.backend import KubernetesBackend
from lanenb.backends.kubernetes.manifests import build_mpijob, render

__all__ = ["KubernetesBackend", "build_mpijob", "render"]
