"""What every snapshot store offers: the ``Snapshot`` record, diffs, errors and the store interface.

A *volume* is what a store snapshots: a directory for the local (restic) store, a PVC for the
Kubernetes (CSI) store. Labels follow Kubernetes label syntax on every store, so the same
labels (``job``, ``dataset``, ``code``, free-form tags) work whichever store holds a snapshot.
"""

from __future__ import annotations

import datetime as dt
import re
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from lanenb_trainer.errors import LanenbError, UserError
from lanenb_trainer.k8s_snapshot import LABEL_VALUE
from lanenb.kube.rules import LABEL_MAX, name_problem

__all__ = [
    "Snapshot", "FileChange", "SnapshotDiff", "FileEntry", "Verification", "SnapshotStore",
    "SnapshotError", "SnapshotInputError", "SnapshotNotFoundError", "TargetExistsError",
    "SnapshotNotSupportedError", "SnapshotFailedError", "check_labels", "check_name",
]


class SnapshotError(LanenbError, RuntimeError):
    """The snapshot engine failed (restic exited non-zero, the API server refused)."""


class SnapshotInputError(UserError, ValueError):
    """A bad volume, label, name or id."""


class SnapshotNotFoundError(UserError, KeyError):
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
        text = value if isinstance(value, str) else str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
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
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


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
        return dt.datetime.fromtimestamp(self.created).strftime("%Y-%m-%d %H:%M:%S")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        state = "ready" if self.ready else f"failed: {self.error}" if self.error else "not ready"
        return f"{self.id} {self.name} of {self.volume} ({fmt_size(self.size)}, {self.created_text}, {state})"


@dataclass(frozen=True)
class FileEntry:
    path: str
    type: str  # "file", "dir", "symlink", ...
    size: int | None


@dataclass(frozen=True)
class FileChange:
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
        return (f"{self.a} -> {self.b}: {len(self.added)} added, {len(self.removed)} removed, "
                f"{len(self.changed)} changed")

    def rows(self) -> list[list[str]]:
        sign = {"added": "+", "removed": "-", "changed": "M"}
        return [[sign[c.change], c.path, fmt_size(c.size_before), fmt_size(c.size_after)] for c in self.changes]

    def __str__(self) -> str:
        lines = [self.summary()] + [f"{r[0]} {r[1]}  {r[2]} -> {r[3]}" for r in self.rows()]
        return "\n".join(lines)


@dataclass(frozen=True)
class Verification:
    id: str
    ok: bool
    detail: str

    def __bool__(self) -> bool:
        return self.ok


class SnapshotStore(ABC):
    """A place that keeps versions of volumes. Optional abilities (``diff``, ``files``) raise
    ``SnapshotNotSupportedError`` by default, with the store's name in the message."""

    name: str = ""

    @abstractmethod
    def create(self, volume: str, labels: Mapping[str, Any] | None = None, *, name: str | None = None,
               progress: bool = False) -> Snapshot:
        """Snapshot ``volume`` now; returns once the snapshot is complete (or raises)."""

    @abstractmethod
    def list(self, volume: str | None = None, labels: Mapping[str, Any] | None = None) -> list[Snapshot]:
        """Snapshots, oldest first, of ``volume`` (all volumes when ``None``) having every label given."""

    @abstractmethod
    def get(self, id: str) -> Snapshot:
        """The snapshot with this id (or unique id prefix, or name)."""

    @abstractmethod
    def restore(self, id: str, new_volume: str, *, progress: bool = False) -> str:
        """Restore into a NEW volume (refuses an existing one); returns the new volume."""

    @abstractmethod
    def delete(self, id: str) -> None:
        """Delete the snapshot (data only other snapshots need is kept)."""

    @abstractmethod
    def verify(self, id: str) -> Verification:
        """Check the snapshot can be restored (storage consistent, ready, no error)."""

    def diff(self, a: str, b: str) -> SnapshotDiff:
        raise SnapshotNotSupportedError(f"diff is not available on {self.name or type(self).__name__} snapshots")

    def files(self, id: str) -> list[FileEntry]:
        raise SnapshotNotSupportedError(f"listing files is not available on {self.name or type(self).__name__} snapshots")
