"""$LANENB_HOME on a network filesystem: detected from /proc/mounts, WAL turned off, said once."""

from __future__ import annotations

import sqlite3
import warnings

import pytest

from lanenb.registry.filesystem import is_network_fs, mount_of
from lanenb.registry.jobs import JobRegistry


def _mounts(*lines: str) -> str:
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("fstype", "network"), [
    ("nfs4", True), ("nfs", True), ("cifs", True), ("fuse.sshfs", True), ("ext4", False), ("overlay", False),
    ("tmpfs", False),
])
def test_the_mount_holding_a_path_is_the_longest_mount_point_above_it(tmp_path, fstype, network):
    text = _mounts("overlay / overlay rw 0 0", f"server:/export {tmp_path} {fstype} rw 0 0",
                   f"other:/x {tmp_path}-sibling nfs4 rw 0 0")
    mount = mount_of(tmp_path / "home" / "jobs.sqlite3", text)
    assert mount is not None and mount.point == str(tmp_path) and mount.fstype == fstype
    assert is_network_fs(mount) is network
    assert mount_of("/etc/hostname", text).fstype == "overlay"  # a sibling prefix is not a parent


def test_a_mount_point_with_a_space_is_read_as_the_kernel_escapes_it(tmp_path):
    folder = tmp_path / "shared home"
    folder.mkdir()
    escaped = str(folder).replace(" ", "\\040")
    mount = mount_of(folder / "jobs.sqlite3", _mounts("overlay / overlay rw 0 0", f"srv:/h {escaped} nfs4 rw 0 0"))
    assert mount is not None and mount.point == str(folder) and mount.source == "srv:/h"


def test_on_nfs_the_registry_uses_the_rollback_journal_and_says_why(tmp_path):
    text = _mounts("overlay / overlay rw 0 0", f"filer:/home {tmp_path} nfs4 rw 0 0")
    path = tmp_path / "nfs-home" / "jobs.sqlite3"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry = JobRegistry(path, mounts_text=text)
        JobRegistry(path, mounts_text=text)  # said once per process, not on every open
    assert registry.journal_mode == "delete"
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "nfs4" in messages[0] and "filer:/home" in messages[0] and "WAL" in messages[0]
    registry.add("a", "local", {"dataset": "/d"}, None)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert not path.with_name("jobs.sqlite3-wal").exists()


def test_on_a_local_disk_the_registry_keeps_wal(tmp_path):
    text = _mounts(f"/dev/vda {tmp_path} ext4 rw 0 0")
    registry = JobRegistry(tmp_path / "jobs.sqlite3", mounts_text=text)
    assert registry.journal_mode == "wal"
    with sqlite3.connect(registry.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_registry_moved_from_a_local_disk_to_nfs_leaves_wal(tmp_path):
    path = tmp_path / "jobs.sqlite3"
    JobRegistry(path, mounts_text=_mounts(f"/dev/vda {tmp_path} ext4 rw 0 0")).add("a", "local", {"d": 1}, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        moved = JobRegistry(path, mounts_text=_mounts(f"filer:/h {tmp_path} nfs rw 0 0"))
    assert moved.journal_mode == "delete" and moved.get("a").name == "a"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
