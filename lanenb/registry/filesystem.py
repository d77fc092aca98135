"""Which filesystem holds ``$LANENB_HOME``, and what that means for the SQLite registry.

A team may put ``$LANENB_HOME`` on a shared home (NFS, SMB). SQLite's WAL journal needs a
shared-memory file that only processes on one host can share, so on a network filesystem two
hosts in WAL mode can both believe they hold the write lock and corrupt the file. There the
registry uses the rollback journal (``journal_mode=DELETE``), which relies only on the
filesystem's POSIX locks (NFSv4, or NFSv3 with lockd), plus the busy timeout. A filesystem
with no working locks at all cannot hold the registry: put ``$LANENB_HOME`` on a local disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NETWORK_FILESYSTEMS", "Mount", "mount_of", "is_network_fs"]

# fstypes whose files other hosts change behind this kernel's back (no shared memory across hosts)
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "fuse.glusterfs",
    "fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone", "lustre", "gpfs", "beegfs", "virtiofs",
})


@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/mounts``: what is mounted (``source``), where, and its type."""

    source: str
    point: str
    fstype: str


def _unescape(field: str) -> str:
    """``/proc/mounts`` writes a space in a path as ``\\040`` (and tab, newline, backslash alike)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_of(path: str | os.PathLike[str], mounts_text: str | None = None) -> Mount | None:
    """The mount holding ``path`` (the longest mount point above it), from ``mounts_text``
    (default: this machine's ``/proc/mounts``); None where that is unreadable (not Linux)."""
    if mounts_text is None:
        try:
            mounts_text = Path("/proc/mounts").read_text()
        except OSError:
            return None
    target = os.path.realpath(path)
    best: Mount | None = None
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = _unescape(parts[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.point)):
            best = Mount(_unescape(parts[0]), point, parts[2])
    return best


def is_network_fs(mount: Mount | None) -> bool:
    """True for a filesystem other hosts share (the registry then runs without WAL)."""
    return mount is not None and mount.fstype in NETWORK_FILESYSTEMS
