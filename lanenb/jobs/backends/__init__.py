"""Backend registry (papermill style): backends are looked up by name and imported lazily,
so using the local backend never imports the ``kubernetes`` client.
"""

from __future__ import annotations

from lanenb_trainer.errors import UserError

import importlib
from typing import Any, Callable, Union

from .base import Backend, LogLine

__all__ = ["Backend", "LogLine", "BackendError", "register_backend", "get_backend", "available_backends"]

Factory = Callable[..., Backend]

# name -> factory, or "module:attribute" resolved on first use
_REGISTRY: dict[str, Union[Factory, str]] = {
    "local": "lanenb.jobs.backends.local:LocalBackend",
    "kubernetes": "lanenb.jobs.backends.kubernetes:KubernetesBackend",
}


class BackendError(UserError, ValueError):
    """Unknown or unloadable backend."""


def register_backend(name: str, factory: Union[Factory, str]) -> None:
    """Make ``name`` usable in ``TrainSpec(backend=name)``; ``factory`` may be a
    "module:attribute" string to defer the import."""
    if not isinstance(name, str) or not name.strip():
        raise BackendError(f"backend name must be a non-empty string, got {name!r}")
    if not (callable(factory) or (isinstance(factory, str) and ":" in factory)):
        raise BackendError(f"backend factory for {name!r} must be callable or 'module:attribute', got {factory!r}")
    _REGISTRY[name] = factory


def available_backends() -> list[str]:
    return sorted(_REGISTRY)


def _resolve(name: str) -> Factory:
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise BackendError(
            f"unknown backend {name!r}; available backends: {', '.join(available_backends())}"
        ) from None
    if isinstance(factory, str):
        module_name, _, attr = factory.partition(":")
        try:
            module = importlib.import_module(module_name)
            factory = getattr(module, attr)
        except (ImportError, AttributeError) as exc:
            raise BackendError(f"backend {name!r} could not be loaded from {module_name}:{attr}: {exc}") from exc
        _REGISTRY[name] = factory
    return factory


def get_backend(name: str, **opts: Any) -> Backend:
    backend = _resolve(name)(**opts)
    if not getattr(backend, "name", ""):
        backend.name = name
    return backend
