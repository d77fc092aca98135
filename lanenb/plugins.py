"""One small registry of named, lazily imported implementations (papermill ``engines.py`` style).

Job backends (``lanenb.contract.backends``) and snapshot stores (``lanenb.snapshots``) are both
looked up by a name that a user types (``backend="kubernetes"``), and both must not import
their heavy dependency (the ``kubernetes`` client, restic wrappers) until that name is used.
A "module:attribute" string defers the import to the first lookup.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from lanenb_trainer.errors import UserError

__all__ = ["Registry", "RegistryError"]

T = TypeVar("T")


class RegistryError(UserError, ValueError):
    """Unknown or unloadable implementation name."""


class Registry(Generic[T]):
    """Names -> factories, resolved on first use.

    Args:
        kind: what the entries are, in error messages ("backend", "snapshot store").
        entries: initial ``name -> factory or "module:attribute"``.
        error: the error class raised (a ``UserError`` subclass with a standard second base).
    """

    def __init__(self, kind: str, entries: dict[str, Callable[..., T] | str] | None = None,
                 error: type[Exception] = RegistryError) -> None:
        self.kind = kind
        self.entries: dict[str, Callable[..., T] | str] = dict(entries or {})
        self.error = error

    def register(self, name: str, factory: Callable[..., T] | str) -> None:
        """Make ``name`` usable; a later registration of the same name replaces the earlier one."""
        if not isinstance(name, str) or not name.strip():
            raise self.error(f"{self.kind} name must be a non-empty string, got {name!r}")
        if not (callable(factory) or (isinstance(factory, str) and ":" in factory)):
            raise self.error(f"{self.kind} factory for {name!r} must be callable or 'module:attribute', "
                             f"got {factory!r}")
        self.entries[name] = factory

    def names(self) -> list[str]:
        return sorted(self.entries)

    def resolve(self, name: str) -> Callable[..., T]:
        """The factory registered as ``name``, importing it on first use."""
        try:
            factory = self.entries[name]
        except (KeyError, TypeError):
            raise self.error(f"unknown {self.kind} {name!r}; "
                             f"available {self.kind}s: {', '.join(self.names())}") from None
        if isinstance(factory, str):
            module_name, _, attr = factory.partition(":")
            try:
                factory = getattr(importlib.import_module(module_name), attr)
            except (ImportError, AttributeError) as exc:
                raise self.error(f"{self.kind} {name!r} could not be loaded from {module_name}:{attr}: {exc}") from exc
            self.entries[name] = factory
        return factory

    def create(self, name: str, **opts: Any) -> T:
        return self.resolve(name)(**opts)
