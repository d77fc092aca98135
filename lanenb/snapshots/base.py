"""What every snapshot store offers: the ``Snapshot`` record, diffs, errors and the store interface.

A *volume* is what a store snapshots: a directory for the local (restic) store, a PVC for the
Kubernetes (CSI) store. Labels follow Kubernetes label syntax on every store, so the same
labels (``job``, ``dataset``, ``code``, free-form tags) work whichever store holds a snapshot.
"""

from __future__ import annotations

import builtins
import datetime as dt
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from lanenb.charts.formats import format_bytes
from lanenb.kube.rules import LABEL_MAX, name_problem
from lanenb_trainer.errors import LanenbError, UserError
from lanenb_trainer.k8s_snapshot import LABEL_VALUE

__all__ = [
    "Snapshot", "FileChange", "SnapshotDiff", "FileEntry", "Verification", "SnapshotStore",
    "SnapshotError", "SnapshotInputError", "SnapshotNotFoundError", "TargetExistsError",
    "SnapshotNotSupportedError", "SnapshotFailedError", "check_labels", "check_name", "snapshot_id",
]


class SnapshotError(LanenbError, RuntimeError):
    """The snapshot engine failed (restic exited non-zero, the API server refused)."""


class SnapshotInputError(UserError, ValueError):
    """A bad volume, label, name or id."""


class SnapshotNotFoundError(UserError, KeyError):
    """No snapshot with that id, id prefix or name in the store (or the prefix is ambiguous)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "snapshot not found"


class TargetExistsError(UserError, FileExistsError):
    """Restore refuses a target that already exists: it never overwrites data."""


class SnapshotNotSupportedError(UserError, NotImplementedError):
    """The store cannot do this (e.g. diff on CSI snapshots)."""


class SnapshotFailedError(LanenbError, RuntimeError):
    """The snapshot was taken but the storage system reports an error (CSI ``status.error``)."""


_LABEL_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
RESERVED_PREFIX = "lanenb."


def check_labels(labels: Mapping[str, Any] | None) -> dict[str, str]:
    """Labels as ``{key: value}`` strings in Kubernetes label syntax (<= 63 characters,
    letters, digits, ``-_.``, alphanumeric at both ends); keys starting ``lanenb.`` are ours."""
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise SnapshotInputError(f"labels must be a dict of strings, got {labels!r}")
    out: dict[str, str] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not _LABEL_KEY.match(key) or key.startswith(RESERVED_PREFIX):
            raise SnapshotInputError(
                f"label key {key!r} is not valid: 1-63 letters, digits, '-', '_' or '.', alphanumeric at both "
                f"ends, not starting with {RESERVED_PREFIX!r}")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        text = value if isinstance(value, str) else str(value) if number else None
        if text is None or not LABEL_VALUE.match(text):
            raise SnapshotInputError(
                f"label {key}={value!r} is not valid: values are 0-63 letters, digits, '-', '_' or '.', "
                "alphanumeric at both ends (no '/', spaces or commas)")
        out[key] = text
    return out


def check_name(name: str) -> str:
    """A snapshot or volume name: an RFC 1123 name (what Kubernetes accepts for a
    VolumeSnapshot or PVC: dot-separated labels, so no ``..`` or ``.-``), here <= 63."""
    problem = name_problem(name, "subdomain", max_len=LABEL_MAX)
    if problem:
        raise SnapshotInputError(f"snapshot name {name!r} is not valid: it {problem}")
    return name


def parse_time(text: str | None) -> float:
    """RFC 3339 (with any number of fractional digits, as restic and CSI drivers write) -> UNIX s."""
    if not text:
        return 0.0
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text)
    if not m:
        raise SnapshotError(f"unreadable time {text!r}")
    base = dt.datetime.fromisoformat(m.group(1) + m.group(3).replace("Z", "+00:00"))
    return base.timestamp() + (float("0" + m.group(2)) if m.group(2) else 0.0)


def fmt_size(size: int | None) -> str:
    """A size as every face writes it (``lanenb.charts.formats.format_bytes``: binary units)."""
    return format_bytes(size)


@dataclass(frozen=True)
class Snapshot:
    """One stored version of a volume.

    Attributes:
        id: what ``get``/``restore``/``delete`` take (restic short id; VolumeSnapshot name).
        name: a readable name (the ``lanenb.name`` tag locally; the object name on Kubernetes).
        volume: the source: an absolute directory, or a PVC name.
        created: UNIX seconds.
        size: bytes the snapshot restores to (``None`` while unknown).
        labels: job, dataset, code version, free-form tags.
        ready: usable for restore (CSI: ``readyToUse``; restic snapshots are ready once visible).
        backend: the store's name ("local", "kubernetes").
        file_count: files in the snapshot where the store can count them.
        error: the storage system's error in words (CSI ``status.error``), else ``None``.
    """

    id: str
    name: str
    volume: str
    created: float
    size: int | None
    labels: dict[str, str] = field(default_factory=dict)
    ready: bool = True
    backend: str = "local"
    file_count: int | None = None
    error: str | None = None

    @property
    def created_text(self) -> str:
        """``created`` as local ``YYYY-MM-DD HH:MM:SS``, for tables."""
        return dt.datetime.fromtimestamp(self.created).strftime("%Y-%m-%d %H:%M:%S")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (the server's snapshot API and ``--json`` output)."""
        return asdict(self)

    def __str__(self) -> str:
        state = "ready" if self.ready else f"failed: {self.error}" if self.error else "not ready"
        return f"{self.id} {self.name} of {self.volume} ({fmt_size(self.size)}, {self.created_text}, {state})"


def snapshot_id(ref: str | Snapshot, what: str = "snapshot id") -> str:
    """The id a store looks up for ``ref``: a ``Snapshot``'s own ``id``, or the string given
    (an id, a unique prefix or a name).

    Every call that takes an id takes the object too, so ``diff(create(...), create(...))``
    works on what ``create`` returned; anything else is refused with the value named.

    Raises:
        SnapshotInputError: ``ref`` is neither a ``Snapshot`` nor a non-empty string.
    """
    if isinstance(ref, Snapshot):
        return ref.id
    if not isinstance(ref, str) or not ref.strip():
        raise SnapshotInputError(f"{what} must be a Snapshot or a non-empty string (id, unique prefix or name), "
                                 f"got {ref!r}")
    return ref


@dataclass(frozen=True)
class FileEntry:
    """One file or directory inside a snapshot (``files()``): path relative to the volume."""

    path: str
    type: str  # "file", "dir", "symlink", ...
    size: int | None


@dataclass(frozen=True)
class FileChange:
    """One path that differs between two snapshots; a size is ``None`` on the side it is missing."""

    path: str
    change: str  # "added" | "removed" | "changed"
    size_before: int | None
    size_after: int | None


@dataclass
class SnapshotDiff:
    """What changed from snapshot ``a`` to snapshot ``b`` (files only)."""

    a: str
    b: str
    changes: list[FileChange]

    def _of(self, kind: str) -> list[FileChange]:
        return [c for c in self.changes if c.change == kind]

    @property
    def added(self) -> list[FileChange]:
        return self._of("added")

    @property
    def removed(self) -> list[FileChange]:
        return self._of("removed")

    @property
    def changed(self) -> list[FileChange]:
        return self._of("changed")

    def summary(self) -> str:
        """One line: how many files were added, removed and changed."""
        return (f"{self.a} -> {self.b}: {len(self.added)} added, {len(self.removed)} removed, "
                f"{len(self.changed)} changed")

    def rows(self) -> list[list[str]]:
        """``[sign, path, size before, size after]`` per change (sign ``+``/``-``/``M``), for tables."""
        sign = {"added": "+", "removed": "-", "changed": "M"}
        return [[sign[c.change], c.path, fmt_size(c.size_before), fmt_size(c.size_after)] for c in self.changes]

    def __str__(self) -> str:
        lines = [self.summary()] + [f"{r[0]} {r[1]}  {r[2]} -> {r[3]}" for r in self.rows()]
        return "\n".join(lines)


@dataclass(frozen=True)
class Verification:
    """The answer of ``verify``: truthy when the snapshot can be restored, ``detail`` says why not."""

    id: str
    ok: bool
    detail: str

    def __bool__(self) -> bool:
        return self.ok


class SnapshotStore(ABC):
    """A place that keeps versions of volumes. Optional abilities (``diff``, ``files``) raise
    ``SnapshotNotSupportedError`` by default, with the store's name in the message.

    Get one with ``lanenb.snapshots.get_store("local" | "kubernetes", ...)``; the module-level
    functions (``create``, ``list`` ...) are shortcuts for one call on a store.
    """

    name: str = ""
    namespaced: bool = False  # the store takes ``namespace=`` (a cluster's namespaces)

    @abstractmethod
    def create(self, volume: str, labels: Mapping[str, Any] | None = None, *, name: str | None = None,
               progress: bool = False) -> Snapshot:
        """Snapshot ``volume`` now; returns once the snapshot is complete (or raises).

        Args:
            volume: a directory (local store) or a PVC name (Kubernetes store).
            labels: ``{key: value}`` in Kubernetes label syntax, so they mean the same on every
                store (``job``, ``dataset``, ``code``, free-form tags).
            name: a readable name; default the volume's name and the time.
            progress: show a progress bar where the store can (local).

        Returns:
            The complete ``Snapshot``: a half-made one is never left visible.

        Raises:
            SnapshotInputError: bad volume, labels or name.
            SnapshotFailedError: the storage system reported an error (Kubernetes).
            SnapshotError: the engine failed (restic, the API server).
        """

    @abstractmethod
    def list(self, volume: str | None = None, labels: Mapping[str, Any] | None = None) -> list[Snapshot]:
        """Snapshots, oldest first, of ``volume`` (all volumes when ``None``) having every label given.

        Args:
            volume: only this volume's snapshots; ``None`` for every volume in the store.
            labels: only snapshots carrying all of these labels (e.g. ``{"job": "lane-1"}``).

        Returns:
            ``Snapshot`` objects, oldest first (an empty list when none match).

        Raises:
            SnapshotInputError: labels not in label syntax.
            SnapshotError: the store cannot be read.
        """

    @abstractmethod
    def get(self, id: str | Snapshot) -> Snapshot:
        """The snapshot with this id (or unique id prefix, or name).

        Args:
            id: a ``Snapshot``, its ``id``, a prefix of it that only one snapshot has, or its name.

        Returns:
            The ``Snapshot``.

        Raises:
            SnapshotNotFoundError: none matches (or the prefix is ambiguous).
        """

    @abstractmethod
    def restore(self, id: str | Snapshot, new_volume: str, *, progress: bool = False) -> str:
        """Restore into a NEW volume (refuses an existing one); returns the new volume.

        Never into an existing volume, so a restore cannot destroy data (compare, then swap).

        Args:
            id: the snapshot (a ``Snapshot``, or its id, unique prefix or name).
            new_volume: a directory that does not exist yet, or a new PVC name (same namespace).
            progress: show a progress bar where the store can (local).

        Returns:
            The new volume (an absolute directory, or the PVC name).

        Raises:
            TargetExistsError: ``new_volume`` exists; nothing was changed.
            SnapshotInputError: ``new_volume`` is not a valid name, or the snapshot is not ready.
            SnapshotNotFoundError: no such snapshot.
            SnapshotError: the engine failed; nothing is left at ``new_volume``.
        """

    @abstractmethod
    def delete(self, id: str | Snapshot) -> None:
        """Delete the snapshot (data only other snapshots need is kept).

        Args:
            id: the snapshot (a ``Snapshot``, or its id, unique prefix or name).

        Raises:
            SnapshotNotFoundError: no such snapshot.
            SnapshotError: the engine failed.
        """

    @abstractmethod
    def verify(self, id: str | Snapshot) -> Verification:
        """Check the snapshot can be restored (storage consistent, ready, no error).

        Args:
            id: the snapshot (a ``Snapshot``, or its id, unique prefix or name).

        Returns:
            A ``Verification``: ``bool(result)`` is the answer, ``detail`` says why.

        Raises:
            SnapshotNotFoundError: no such snapshot.
        """

    def diff(self, a: str | Snapshot, b: str | Snapshot) -> SnapshotDiff:
        """Files added, removed and changed from snapshot ``a`` to snapshot ``b``.

        Args:
            a: the older snapshot (a ``Snapshot``, or its id, unique prefix or name).
            b: the newer snapshot.

        Returns:
            A ``SnapshotDiff`` (``added``, ``removed``, ``changed``, ``summary()``).

        Raises:
            SnapshotNotSupportedError: the store keeps opaque copies (Kubernetes CSI snapshots).
            SnapshotNotFoundError: ``a`` or ``b`` does not exist.
        """
        raise SnapshotNotSupportedError(f"diff is not available on {self.name or type(self).__name__} snapshots")

    def unchanged_since(self, volume: str, id: str | Snapshot) -> bool:
        """Whether ``volume`` still holds what snapshot ``id`` of it holds, so a new snapshot
        would be a copy of that one (``--snapshot`` runs reuse it instead of taking another).

        Args:
            volume: a directory (local store) or a PVC name.
            id: a snapshot of that volume (a ``Snapshot``, or its id, unique prefix or name).

        Returns:
            ``True`` only when the store can tell nothing changed; ``False`` when something did
            or the store cannot tell (the default: take a new snapshot).

        Raises:
            SnapshotNotFoundError: no such snapshot.
        """
        return False

    def files(self, id: str | Snapshot) -> builtins.list[FileEntry]:  # list: the method above
        """The files inside a snapshot, without restoring it.

        Args:
            id: the snapshot (a ``Snapshot``, or its id, unique prefix or name).

        Returns:
            ``FileEntry`` objects (path relative to the volume, type, size).

        Raises:
            SnapshotNotSupportedError: the store cannot look inside (Kubernetes CSI snapshots).
            SnapshotNotFoundError: no such snapshot.
        """
        raise SnapshotNotSupportedError(
            f"listing files is not available on {self.name or type(self).__name__} snapshots")
