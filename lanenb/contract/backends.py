"""Backend registry (papermill style): backends are looked up by name and imported lazily,
so using the local backend never imports the ``kubernetes`` client.

Each backend is a ``BackendDescriptor`` (``lanenb.contract.descriptor``): its factory as a
``"module:attribute"`` string, its options class, flags, capabilities and spec check. This is
the one place in the generic layers that names the built-in backends; ``TrainSpec``, the flags,
the launch panel and ``--help`` read the descriptors. Third-party backends register through the
``lanenb.backends`` entry point (an entry point naming a ``BackendDescriptor``, or a callable
returning one), loaded on the first lookup.

The registry knows names and descriptors, not the interface (``lanenb.contract.backend``), so
``TrainSpec`` can check a backend name here while the interface refers to ``TrainSpec``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lanenb.contract.descriptor import BackendDescriptor
from lanenb.plugins import check_entry, load_factory
from lanenb_trainer.errors import UserError

if TYPE_CHECKING:
    from lanenb.contract.backend import Backend

__all__ = ["BackendError", "register_backend", "register_descriptor", "unregister_backend", "get_backend",
           "get_descriptor", "available_backends", "descriptors", "load_entry_points", "ENTRY_POINT_GROUP"]

log = logging.getLogger(__name__)
Factory = Callable[..., "Backend"]
ENTRY_POINT_GROUP = "lanenb.backends"


class BackendError(UserError, ValueError):
    """Unknown or unloadable backend."""


# the built-in backends, each a folder of lanenb/backends/ with a descriptor module, loaded as
# entry points are (on the first lookup): this module names no backend
BUILTIN = (
    "lanenb.backends.local.descriptor:DESCRIPTOR",
    "lanenb.backends.kubernetes.descriptor:DESCRIPTOR",
    "lanenb.backends.azureml.descriptor:DESCRIPTOR",
    "lanenb.backends.fetch.descriptor:DESCRIPTOR",
)
# the one registry: name -> descriptor (its factory imported on first use, cached by the string)
_DESCRIPTORS: dict[str, BackendDescriptor] = {}
_LOADED: dict[str, Factory] = {}  # "module:attribute" -> the class it names
_entry_points_loaded = False


def register_descriptor(descriptor: BackendDescriptor, *, override: bool = False) -> None:
    """Make ``descriptor.name`` usable everywhere: ``TrainSpec(backend=...)``, its flags in
    ``%lanetrain``/``lanenb train``, its section in the launch panel. Built-in backends are
    registered this way too, as entry points are.

    Raises:
        BackendError: not a ``BackendDescriptor``, a bad name or factory, or a name already
            registered without ``override=True`` (a plug-in never silently takes a name).
    """
    if not isinstance(descriptor, BackendDescriptor):
        raise BackendError(f"a backend must be registered as a BackendDescriptor, got {descriptor!r}")
    check_entry("backend", descriptor.name, descriptor.factory, BackendError)
    if descriptor.name in _DESCRIPTORS and not override:
        raise BackendError(f"backend {descriptor.name!r} is already registered; pass override=True to replace it")
    _DESCRIPTORS[descriptor.name] = descriptor


def register_backend(name: str, factory: Factory | str, *, trains: bool = True, override: bool = False) -> None:
    """Make ``name`` usable in ``TrainSpec(backend=name)`` with no options or flags of its own;
    ``factory`` may be a "module:attribute" string to defer the import. ``trains=False``: a
    backend that runs other jobs (its own spec type, see ``Backend.spec_from_dict``), left out of
    ``available_backends``. ``register_descriptor`` registers one with options and flags."""
    register_descriptor(BackendDescriptor(name, factory, trains=trains), override=override)


def unregister_backend(name: str) -> None:
    """Forget backend ``name`` (a notebook's own backend, a test's); unknown names are ignored."""
    _DESCRIPTORS.pop(name, None)


_BUILTINS: dict[str, BackendDescriptor] = {}  # BUILTIN's descriptors by name, imported once


def _load_builtins() -> None:
    """Register each built-in descriptor not registered yet (an explicit override stays)."""
    if not _BUILTINS:
        for ref in BUILTIN:
            descriptor: Any = load_factory("backend", ref, ref, BackendError)
            if not isinstance(descriptor, BackendDescriptor):  # pragma: no cover - ours
                raise BackendError(f"{ref} is not a BackendDescriptor")
            _BUILTINS[descriptor.name] = descriptor
    for name, descriptor in _BUILTINS.items():
        if name not in _DESCRIPTORS:
            register_descriptor(descriptor)


def load_entry_points(force: bool = False) -> list[str]:
    """Register the backends that installed packages declare in the ``lanenb.backends`` entry
    point group (each names a ``BackendDescriptor`` or a callable returning one). Done once, on
    the first lookup; ``force`` scans again (after installing a package in a running kernel).

    Returns:
        The names registered by this call. A broken entry point is logged and skipped, so one
        bad plug-in does not take the built-in backends down.
    """
    global _entry_points_loaded
    _load_builtins()  # the built-ins first, the way entry points are (one loader, one registry)
    if _entry_points_loaded and not force:
        return []
    _entry_points_loaded = True
    names = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            found = ep.load()
            descriptor = found() if callable(found) and not isinstance(found, BackendDescriptor) else found
            if descriptor.name in _BUILTINS and not descriptor.replaces_builtin:
                log.warning("lanenb.backends entry point %r (%s) names the built-in backend %r: ignored (set "
                            "replaces_builtin=True in its BackendDescriptor to replace it)", ep.name, ep.value,
                            descriptor.name)
                continue
            register_descriptor(descriptor, override=descriptor.name in _BUILTINS)
        except Exception as exc:  # a third party's bug: say which, keep the rest usable
            log.warning("lanenb.backends entry point %r (%s) could not be loaded: %s", ep.name, ep.value, exc)
            continue
        names.append(descriptor.name)
    return names


def descriptors() -> list[BackendDescriptor]:
    """Every backend a ``TrainSpec`` can name, in ``available_backends`` order."""
    load_entry_points()
    return [_DESCRIPTORS[n] for n in available_backends()]


def get_descriptor(name: str) -> BackendDescriptor:
    """The descriptor of backend ``name``.

    Raises:
        BackendError: no such backend; the message lists the available ones.
    """
    load_entry_points()
    try:
        return _DESCRIPTORS[name]
    except (KeyError, TypeError):
        raise BackendError(f"unknown backend {name!r}; available backends: "
                           f"{', '.join(sorted(_DESCRIPTORS))}") from None


def option_sections() -> dict[str, BackendDescriptor]:
    """``TrainSpec.backend_options`` key -> the descriptor whose options live there."""
    load_entry_points()
    return {d.options_key: d for d in _DESCRIPTORS.values() if d.options is not None}


def available_backends() -> list[str]:
    """The backends a ``TrainSpec`` can name (the launch form's choices)."""
    load_entry_points()
    return [n for n in sorted(_DESCRIPTORS) if _DESCRIPTORS[n].trains]


def backends_help() -> str:
    """``--backend``'s help: every backend with its one line."""
    return "; ".join(f"{d.name}: {d.summary}" if d.summary else d.name for d in descriptors()) + \
        " (default local)"


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """One argparse group per backend with flags (``<name> options``), dests ``<section>.<option>``."""
    for d in descriptors():
        if not d.flags:
            continue
        group = parser.add_argument_group(f"{d.name} options (--backend {d.name})")
        for flags, kw in d.flags:
            kw = dict(kw, dest=d.flag_dest(kw, flags))
            kw.setdefault("default", None)
            group.add_argument(*flags, **kw)


def _resolve(name: str) -> Factory:
    factory = get_descriptor(name).factory
    if not isinstance(factory, str):
        return factory
    if factory not in _LOADED:
        _LOADED[factory] = load_factory("backend", name, factory, BackendError)
    return _LOADED[factory]


def get_backend(name: str, **opts: Any) -> Backend:
    backend = _resolve(name)(**opts)
    if not getattr(backend, "name", ""):
        backend.name = name
    return backend
