"""Backend registry (papermill style): backends are looked up by name and imported lazily,
so using the local backend never imports the ``kubernetes`` client.

The registry knows names and factories, not the interface (``lanenb.contract.backend``), so
``TrainSpec`` can check a backend name here while the interface refers to ``TrainSpec``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lanenb.plugins import Registry
from lanenb_trainer.errors import UserError

if TYPE_CHECKING:
    from lanenb.contract.backend import Backend

__all__ = ["BackendError", "register_backend", "get_backend", "available_backends"]

Factory = Callable[..., "Backend"]


class BackendError(UserError, ValueError):
    """Unknown or unloadable backend."""


# name -> factory, or "module:attribute" resolved on first use (the one generic registry,
# shared with lanenb.snapshots)
_BACKENDS: Registry[Backend] = Registry("backend", {
    "local": "lanenb.backends.local:LocalBackend",
    "kubernetes": "lanenb.backends.kubernetes:KubernetesBackend",
    "azureml": "lanenb.backends.azureml:AzureMLBackend",  # the SDK (azure-ai-ml) is imported on first use
    "kubernetes-fetch": "lanenb.backends.fetch:KubernetesFetchBackend",  # dataset fetch Jobs
}, error=BackendError)
_REGISTRY: dict[str, Factory | str] = _BACKENDS.entries
# backends whose jobs run another spec than TrainSpec: found by get_job, never offered for training
_NOT_FOR_TRAINING = {"kubernetes-fetch"}


def register_backend(name: str, factory: Factory | str, *, trains: bool = True) -> None:
    """Make ``name`` usable in ``TrainSpec(backend=name)``; ``factory`` may be a
    "module:attribute" string to defer the import. ``trains=False``: a backend that runs
    other jobs (its own spec type, see ``Backend.spec_from_dict``), left out of
    ``available_backends``."""
    _BACKENDS.register(name, factory)
    (_NOT_FOR_TRAINING.discard if trains else _NOT_FOR_TRAINING.add)(name)


def available_backends() -> list[str]:
    """The backends a ``TrainSpec`` can name (the launch form's choices)."""
    return [n for n in _BACKENDS.names() if n not in _NOT_FOR_TRAINING]


def _resolve(name: str) -> Factory:
    return _BACKENDS.resolve(name)


def get_backend(name: str, **opts: Any) -> Backend:
    backend = _resolve(name)(**opts)
    if not getattr(backend, "name", ""):
        backend.name = name
    return backend
