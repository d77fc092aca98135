"""One small registry of named, lazily imported implementations (papermill ``engines.py`` style).

Job backends (``lanenb.contract.backends``) and snapshot stores (``lanenb.snapshots``) are both
looked up by a name that a user types (``backend="kubernetes"``), and both must not import
their heavy dependency (the ``kubernetes`` client, restic wrappers) until that name is used.
A "module:attribute" string defers the import to the first lookup.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from lanenb_trainer.errors import UserError

__all__ = ["Registry", "RegistryError", "check_entry", "load_factory", "lazy_attributes"]

T = TypeVar("T")


class RegistryError(UserError, ValueError):
    """Unknown or unloadable implementation name."""


def check_entry(kind: str, name: Any, factory: Any, error: type[Exception] = RegistryError) -> None:
    """A registrable name and factory (callable or ``"module:attribute"``), else ``error``."""
    if not isinstance(name, str) or not name.strip():
        raise error(f"{kind} name must be a non-empty string, got {name!r}")
    if not (callable(factory) or (isinstance(factory, str) and ":" in factory)):
        raise error(f"{kind} factory for {name!r} must be callable or 'module:attribute', got {factory!r}")


def load_factory(kind: str, name: str, factory: Callable[..., T] | str,
                 error: type[Exception] = RegistryError) -> Callable[..., T]:
    """``factory`` itself, or the attribute a ``"module:attribute"`` string names, imported now."""
    if not isinstance(factory, str):
        return factory
    module_name, _, attr = factory.partition(":")
    try:
        return cast(Callable[..., T], getattr(importlib.import_module(module_name), attr))
    except (ImportError, AttributeError) as exc:
        raise error(f"{kind} {name!r} could not be loaded from {module_name}:{attr}: {exc}") from exc


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

    def register(self, name: str, factory: Callable[..., T] | str, *, override: bool = False) -> None:
        """Make ``name`` usable.

        Raises:
            RegistryError: (``error``) a bad name or factory, or a name already registered
                without ``override=True``: a plug-in must not silently take another's name.
        """
        check_entry(self.kind, name, factory, self.error)
        if name in self.entries and not override:
            raise self.error(f"{self.kind} {name!r} is already registered; pass override=True to replace it")
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
        loaded = load_factory(self.kind, name, factory, self.error)
        self.entries[name] = loaded
        return loaded

    def create(self, name: str, **opts: Any) -> T:
        return self.resolve(name)(**opts)


def lazy_attributes(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` (PEP 562) that imports ``names[attr]`` (a module) on
    the first use of ``attr``: a package can name what it holds without importing it (a backend's
    package without its SDK, read by ``--help`` and the launch panel)."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
