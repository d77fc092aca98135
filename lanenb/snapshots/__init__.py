"""Versioned data and models: snapshot a volume, browse versions, diff, restore into a NEW volume.

Two stores behind one interface, chosen by name like job backends (``lanenb.plugins``):

- ``"local"`` (default): a directory, snapshotted with restic under ``$LANENB_HOME/snapshots``;
- ``"kubernetes"`` (alias ``"csi"``): a PVC, snapshotted as a CSI ``VolumeSnapshot``.

Example::

    import lanenb.snapshots as snaps
    s = snaps.create("data/tusimple", {"dataset": "tusimple", "job": "lane-1"})
    snaps.diff(s.id, snaps.create("data/tusimple").id)
    snaps.restore(s.id, "data/tusimple-v1")        # a new directory; never overwrites
    job = lanenb.retrain(s.id, "data/tusimple-v1b", epochs=3)  # restore + train with lane-1's settings
                                                              # (lanenb.workflows: uses stores and jobs)
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from lanenb.plugins import Registry
from lanenb.snapshots.base import (
    FileChange,
    FileEntry,
    Snapshot,
    SnapshotDiff,
    SnapshotError,
    SnapshotFailedError,
    SnapshotInputError,
    SnapshotNotFoundError,
    SnapshotNotSupportedError,
    SnapshotStore,
    TargetExistsError,
    Verification,
)

__all__ = [
    "Snapshot", "SnapshotDiff", "FileChange", "FileEntry", "Verification", "SnapshotStore",
    "SnapshotError", "SnapshotInputError", "SnapshotNotFoundError", "SnapshotNotSupportedError",
    "SnapshotFailedError", "TargetExistsError", "StoreError",
    "register_store", "available_stores", "get_store", "store_takes_namespace",
    "create", "list", "get", "diff", "restore", "delete", "verify", "files",
]


class StoreError(SnapshotInputError):
    """Unknown or unloadable snapshot store."""


_STORES: Registry[SnapshotStore] = Registry("snapshot store", {
    "local": "lanenb.snapshots.local:ResticStore",
    "kubernetes": "lanenb.snapshots.csi:CsiStore",
    "csi": "lanenb.snapshots.csi:CsiStore",
}, error=StoreError)


def register_store(name: str, factory: Any) -> None:
    """Make ``backend=name`` usable in every snapshot function, the panels and the CLI.

    Args:
        name: the name users pass as ``backend=``.
        factory: a ``SnapshotStore`` subclass or callable building one from keyword options, or a
            ``"module:attribute"`` string, imported on first use (so a plugin costs nothing until used).
    """
    _STORES.register(name, factory)


def store_takes_namespace(name: str) -> bool:
    """Whether store ``name`` takes ``namespace=`` (its class says, ``SnapshotStore.namespaced``).

    Raises:
        StoreError: no such store.
    """
    return bool(getattr(_STORES.resolve(name), "namespaced", False))


def available_stores() -> builtins.list[str]:
    """The store names ``backend=`` accepts ("local", "kubernetes", "csi", and any registered)."""
    return _STORES.names()


def get_store(backend: str | SnapshotStore = "local", **opts: Any) -> SnapshotStore:
    """The store named ``backend``, to make several calls on one store without naming it each time.

    Args:
        backend: "local", "kubernetes" (alias "csi"), a registered name, or a store object
            (returned as it is, so every function here takes either).
        **opts: the store's options (Kubernetes: ``namespace``, ``kubeconfig``, ``context``,
            ``snapshot_class``, ``timeout``).

    Returns:
        The ``SnapshotStore``.

    Raises:
        StoreError: no store of that name, or it cannot be loaded.
    """
    if isinstance(backend, SnapshotStore):
        return backend
    return _STORES.create(backend, **opts)


def create(volume: str, labels: Mapping[str, Any] | None = None, *, name: str | None = None,
           backend: str | SnapshotStore = "local", progress: bool = False, **opts: Any) -> Snapshot:
    """Snapshot ``volume`` (a directory locally, a PVC name on Kubernetes).

    Args:
        volume: what to snapshot.
        labels: e.g. ``{"job": "lane-1", "dataset": "tusimple", "code": "3f2a9c1"}`` (Kubernetes
            label syntax: <= 63 letters, digits, ``-_.``).
        name: a readable name (default: the volume's name + time).
        backend: "local" or "kubernetes" (or a store object).
        progress: show a progress bar (local).
        **opts: the store's options (see ``get_store``).

    Returns:
        The complete ``Snapshot`` (Kubernetes: once ``readyToUse``).

    Raises:
        SnapshotInputError: bad volume, labels or name.
        SnapshotFailedError: the storage system reported an error (Kubernetes).
        SnapshotError: the engine failed; no snapshot is left visible.
    """
    return get_store(backend, **opts).create(volume, labels, name=name, progress=progress)


def list(volume: str | None = None, labels: Mapping[str, Any] | None = None, *,
         backend: str | SnapshotStore = "local", **opts: Any) -> builtins.list[Snapshot]:
    """Snapshots, oldest first, of ``volume`` (every volume when ``None``) with all ``labels``.

    Args:
        volume: only this directory's / PVC's snapshots; ``None`` for every volume.
        labels: only snapshots carrying all of these labels (e.g. ``{"job": "lane-1"}``).
        backend: "local" or "kubernetes" (or a store object).
        **opts: the store's options (see ``get_store``).

    Returns:
        ``Snapshot`` objects, oldest first.

    Raises:
        SnapshotInputError: labels not in label syntax.
        SnapshotError: the store cannot be read.
    """
    return get_store(backend, **opts).list(volume, labels)


def get(id: str | Snapshot, *, backend: str | SnapshotStore = "local", **opts: Any) -> Snapshot:
    """One snapshot by id (a unique prefix of it) or name.

    Args:
        id: a ``Snapshot``, its ``id``, a prefix only one snapshot has, or the snapshot's name.
        backend: "local" or "kubernetes" (or a store object).
        **opts: the store's options (see ``get_store``).

    Returns:
        The ``Snapshot``.

    Raises:
        SnapshotNotFoundError: none matches (or the prefix is ambiguous).
    """
    return get_store(backend, **opts).get(id)


def diff(a: str | Snapshot, b: str | Snapshot, *, backend: str | SnapshotStore = "local", **opts: Any) -> SnapshotDiff:
    """Files added, removed and changed from ``a`` to ``b``, with sizes.

    Args:
        a: the older snapshot: a ``Snapshot``, or its id, unique prefix or name.
        b: the newer snapshot.
        backend: "local" or "kubernetes" (or a store object).
        **opts: the store's options (see ``get_store``).

    Returns:
        A ``SnapshotDiff``: ``added``, ``removed``, ``changed``, ``summary()``.

    Raises:
        SnapshotNotSupportedError: on Kubernetes (CSI snapshots are opaque block/file copies).
        SnapshotNotFoundError: ``a`` or ``b`` does not exist.
    """
    return get_store(backend, **opts).diff(a, b)


def restore(id: str | Snapshot, new_volume: str, *, backend: str | SnapshotStore = "local", progress: bool = False,
            **opts: Any) -> str:
    """Restore snapshot ``id`` into ``new_volume``, which must not exist yet (a directory, or a
    new PVC in the same namespace): a restore never overwrites, so it cannot destroy data.

    Args:
        id: the snapshot: a ``Snapshot`` (as ``create``/``list`` return), or its id, unique prefix or name.
        new_volume: a directory that does not exist yet, or a new PVC name.
        backend: "local" or "kubernetes" (or a store object).
        progress: show a progress bar (local).
        **opts: the store's options (see ``get_store``).

    Returns:
        The new volume (an absolute directory, or the PVC name).

    Raises:
        TargetExistsError: ``new_volume`` exists; nothing was changed.
        SnapshotInputError: ``new_volume`` is not a valid name, or the snapshot is not ready.
        SnapshotNotFoundError: no such snapshot.
        SnapshotError: the engine failed; nothing is left at ``new_volume``.
    """
    return get_store(backend, **opts).restore(id, new_volume, progress=progress)


def delete(id: str | Snapshot, *, backend: str | SnapshotStore = "local", **opts: Any) -> None:
    """Delete one snapshot (data other snapshots share is kept).

    Args:
        id: the snapshot: a ``Snapshot`` (as ``create``/``list`` return), or its id, unique prefix or name.
        backend: "local" or "kubernetes" (or a store object).
        **opts: the store's options (see ``get_store``).

    Raises:
        SnapshotNotFoundError: no such snapshot.
        SnapshotError: the engine failed.
    """
    get_store(backend, **opts).delete(id)


def verify(id: str | Snapshot, *, backend: str | SnapshotStore = "local", **opts: Any) -> Verification:
    """Check that snapshot ``id`` can be restored, before relying on it (or deleting the original).

    Args:
        id: the snapshot: a ``Snapshot`` (as ``create``/``list`` return), or its id, unique prefix or name.
        backend: "local" or "kubernetes" (or a store object).
        **opts: the store's options (see ``get_store``).

    Returns:
        A ``Verification``: ``bool(result)`` is the answer, ``.detail`` why.

    Raises:
        SnapshotNotFoundError: no such snapshot.
    """
    return get_store(backend, **opts).verify(id)


def files(id: str | Snapshot, *, backend: str | SnapshotStore = "local", **opts: Any) -> builtins.list[FileEntry]:
    """The files inside a snapshot, without restoring it (local store).

    Args:
        id: the snapshot: a ``Snapshot`` (as ``create``/``list`` return), or its id, unique prefix or name.
        backend: "local" (or a store object; Kubernetes snapshots are opaque).
        **opts: the store's options (see ``get_store``).

    Returns:
        ``FileEntry`` objects: path relative to the volume, type, size.

    Raises:
        SnapshotNotSupportedError: on Kubernetes.
        SnapshotNotFoundError: no such snapshot.
    """
    return get_store(backend, **opts).files(id)
