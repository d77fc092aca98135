"""The ``kubernetes`` backend: a Kubeflow MPIJob per run (``manifests.py`` builds it,
``status.py`` reads it back in words, ``backend.py`` submits, follows and cancels it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lanenb.plugins import lazy_attributes

if TYPE_CHECKING:
    from lanenb.backends.kubernetes.backend import KubernetesBackend
    from lanenb.backends.kubernetes.manifests import build_mpijob, render
    from lanenb.backends.kubernetes.options import KubernetesOptions

__all__ = ["KubernetesBackend", "build_mpijob", "render", "KubernetesOptions"]

# imported on first use: the descriptor (descriptor.py) is read by --help and the panel without
# importing the ``kubernetes`` client
_LAZY = {
    "KubernetesBackend": "lanenb.backends.kubernetes.backend",
    "build_mpijob": "lanenb.backends.kubernetes.manifests",
    "render": "lanenb.backends.kubernetes.manifests",
    "KubernetesOptions": "lanenb.backends.kubernetes.options",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
