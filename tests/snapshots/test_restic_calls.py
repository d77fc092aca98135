"""Each restic call opens the repository (~0.5 s of key derivation), so the hot paths make as
few as they can: a re-snapshot is one ``backup``, restore/delete/verify by id one call each,
and the guarantees (parent-based change detection, unique names) still hold."""

from __future__ import annotations

import json
import os

import pytest
from snapshot_support import calls, counting_restic

from lanenb.snapshots import SnapshotInputError
from lanenb.snapshots.local import ResticStore

pytestmark = pytest.mark.usefixtures("restic_installed")


@pytest.fixture
def counted(tmp_path):
    binary, log = counting_restic(tmp_path)
    store = ResticStore(restic=binary)
    store._ensure_repo()
    calls(log)
    vol = tmp_path / "vol"
    vol.mkdir()
    for i in range(20):
        (vol / f"f{i:02d}.bin").write_bytes(os.urandom(50_000))
    return store, log, vol


def test_a_snapshot_is_one_backup_call_and_uses_the_previous_one_as_parent(counted):
    store, log, vol = counted
    first = store.create(vol, {"job": "a"})
    assert calls(log) == ["backup"]
    again = store.create(vol, {"job": "b"})
    assert calls(log) == ["backup"]
    meta = json.loads((store.meta_dir / f"{store._full_id(again.id)}.json").read_text())
    assert meta["data_added"] < 0.01 * 20 * 50_000  # unchanged files were not read again
    assert store.get(again.id) == again and store.get(first.id) == first
    assert [s.id for s in store.list(vol)] == [first.id, again.id]


def test_restore_verify_and_delete_by_id_are_one_call_each(counted, tmp_path):
    store, log, vol = counted
    snap = store.create(vol)
    calls(log)
    store.restore(snap.id, str(tmp_path / "back"))
    assert calls(log) == ["restore"]
    assert store.verify(snap.id)
    assert calls(log) == ["check"]
    store.delete(snap.id)
    assert calls(log) == ["forget"]


def test_a_given_name_is_still_checked_for_uniqueness(counted):
    store, log, vol = counted
    store.create(vol, name="baseline")
    assert calls(log) == ["snapshots", "backup"]
    with pytest.raises(SnapshotInputError, match="named 'baseline' already exists"):
        store.create(vol, name="baseline")
    assert store.get("baseline").name == "baseline"
