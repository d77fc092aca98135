"""Job backends: where a ``TrainSpec`` runs. One sub-package per backend, each implementing
``lanenb.contract.backend.Backend`` and named in ``lanenb.contract.backends``' registry
(loaded lazily, so the local backend never imports the ``kubernetes`` client).

Add a backend (e.g. Slurm): a ``Backend`` subclass and a ``BackendDescriptor``
(``lanenb.contract.descriptor``: options, flags, capabilities, spec check), in your own package
behind a ``lanenb.backends`` entry point, or here as a folder with its ``descriptor.py``, listed in
``lanenb.contract.backends.BUILTIN`` (``tests/plugins/toy_slurm`` is a complete small example)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lanenb.plugins import lazy_attributes

if TYPE_CHECKING:
    from lanenb.backends.azureml.options import AzureMLOptions
    from lanenb.backends.kubernetes.options import KubernetesOptions
    from lanenb.backends.local.options import LocalOptions

__all__ = ["AzureMLOptions", "KubernetesOptions", "LocalOptions"]

# each backend's options type, for ``lanenb.jobs`` to re-export (imported on first use)
_OPTIONS = {
    "AzureMLOptions": "lanenb.backends.azureml.options",
    "KubernetesOptions": "lanenb.backends.kubernetes.options",
    "LocalOptions": "lanenb.backends.local.options",
}

__getattr__ = lazy_attributes(__name__, _OPTIONS)
