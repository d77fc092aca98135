"""``BackendDescriptor``: what a backend is, told without importing it.

A backend's implementation imports its SDK (the ``kubernetes`` client, ``azure-ai-ml``); the
faces need to know far less to offer it: its flags, its options class, what it can do and how
a spec for it is checked. The descriptor holds exactly that, as plain data and
``"module:attribute"`` strings, so ``%lanetrain --help``, the launch panel and ``TrainSpec`` can
list and check every backend while none of their SDKs is loaded (ipyparallel's launchers own
their options the same way). A third-party backend ships one descriptor and registers it
through the ``lanenb.backends`` entry point; no lanenb file changes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from lanenb.contract.backend import Backend
    from lanenb.contract.spec import TrainSpec

__all__ = ["BackendDescriptor", "Capabilities", "Flag", "OptionsClass", "load_attr"]

# one command-line flag: (names, argparse keywords); ``dest`` is the option's name in the
# backend's options class (the descriptor adds the section, e.g. ``k8s.context``)
Flag = tuple[tuple[str, ...], dict[str, Any]]


class OptionsClass(Protocol):
    """What an options class offers: made from a dict (or itself, or None: the defaults),
    checked as it is made, and written back as a JSON-able dict (the registry row)."""

    @classmethod
    def from_dict(cls, data: Any) -> Any: ...


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, so the generic layers ask instead of branching on its name.

    Args:
        runs_here: jobs run on this machine (local paths, a local run dir, no image).
        volumes: ``Backend.datasets`` names volumes (PVCs) that a launch form mounts for the
            ranks; False: the spec's ``dataset`` is used as it is.
        snapshot_store: the snapshot store (``lanenb.snapshots.get_store`` name, which takes
            ``namespace=``) where the job's ranks snapshot, labelled ``job=<name>``; None: only
            the snapshots recorded in the job registry.
        snapshot_needs_pvc: ``enable_snapshot`` needs ``pvc_name`` (the volume to snapshot);
            False: the backend snapshots the run dir and dataset itself (locally).
        suspend_resume: ``Job.suspend`` and ``Job.resume`` work.
        secret_refs: ``env`` values ``secret:NAME/KEY`` are read from a Kubernetes Secret.
        gpus_optional: ``gpus=0`` leaves the device to the trainer (``auto``: a GPU where torch
            sees one); False: ``gpus=0`` means ``--device cpu`` (a GPU the job did not
            request belongs to another job).
    """

    runs_here: bool = False
    volumes: bool = False
    snapshot_store: str | None = None
    snapshot_needs_pvc: bool = True
    suspend_resume: bool = False
    secret_refs: bool = False
    gpus_optional: bool = True


@dataclass(frozen=True)
class BackendDescriptor:
    """One backend as the faces and ``TrainSpec`` see it; importing it imports no SDK.

    Args:
        name: what ``TrainSpec(backend=...)`` and ``--backend`` say.
        factory: the ``Backend`` class or ``"module:attribute"`` (imported on first use).
        summary: one line for ``--help`` and the launch form.
        options: the options class (``OptionsClass``) or ``"module:attribute"``; None: no options.
        section: the key of its options in ``TrainSpec.backend_options`` (and in a ``%%lanetrain``
            YAML body); default ``name``.
        flags: its command-line flags, ``dest`` naming an option; they form their own argparse
            group and panel section.
        capabilities: what it can do (``Capabilities``).
        check: ``check(spec)`` raises ``SpecError`` for a spec it cannot run (a callable or
            ``"module:attribute"``); runs inside ``TrainSpec.check`` after the job's own fields.
        trains: False for a backend that runs other jobs (its own spec type): found by
            ``get_job``, never offered for training.
        replaces_builtin: an entry point may take a built-in backend's name (``local``) only
            with this set: installing a package must not silently change where jobs run.
    """

    name: str
    factory: Callable[..., Backend] | str
    summary: str = ""
    options: type | str | None = None
    section: str = ""
    flags: tuple[Flag, ...] = ()
    capabilities: Capabilities = field(default_factory=Capabilities)
    check: Callable[[TrainSpec], None] | str | None = None
    trains: bool = True
    replaces_builtin: bool = False

    @property
    def options_key(self) -> str:
        """Where its options live in ``TrainSpec.backend_options``."""
        return self.section or self.name

    def options_class(self) -> Any:
        """The options class (imported on first use), or None."""
        return load_attr(self.options) if isinstance(self.options, str) else self.options

    def make_options(self, value: Any) -> Any:
        """``value`` (a dict, an options object or None) as a checked options object."""
        cls = self.options_class()
        if cls is None:
            return dict(value or {}) if isinstance(value, Mapping) or value is None else value
        return cls.from_dict(value)

    def check_spec(self, spec: TrainSpec) -> None:
        """Run the backend's spec check, if it has one."""
        if self.check is not None:
            (load_attr(self.check) if isinstance(self.check, str) else self.check)(spec)

    def flag_dest(self, kw: Mapping[str, Any], names: tuple[str, ...]) -> str:
        """The ``argparse`` dest of one of its flags: ``<section>.<option>``."""
        option = kw.get("dest") or names[0].lstrip("-").replace("-", "_")
        return f"{self.options_key}.{option}"


def load_attr(target: str) -> Any:
    """``"module:attribute"`` -> the attribute, importing the module."""
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)
