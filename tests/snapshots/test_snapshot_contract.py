"""One behavioural contract, run on both snapshot stores (local restic, Kubernetes CSI)."""

from __future__ import annotations

import re

import pytest

import lanenb.snapshots as snaps
from lanenb.errors import UserError
from lanenb.snapshots import SnapshotInputError, SnapshotNotFoundError, SnapshotNotSupportedError, TargetExistsError

DATA = {"clips/0001/20.jpg": "frame bytes", "label_data.json": '{"lanes": []}\n', "notes.txt": "v1"}


def test_a_snapshot_is_ready_labelled_and_listed(store):
    vol = store.make_volume("data", DATA)
    snap = snaps.create(vol, {"job": "lane-1", "dataset": "tusimple"}, backend=store.store)
    assert snap.ready and snap.error is None
    assert snap.labels == {"job": "lane-1", "dataset": "tusimple"}
    assert snap.volume == vol and snap.size and snap.size > 0 and snap.created > 0
    assert snaps.get(snap.id, backend=store.store) == snap
    assert [s.id for s in snaps.list(backend=store.store)] == [snap.id]


def test_list_filters_by_volume_and_labels(store):
    a, b = store.make_volume("a", DATA), store.make_volume("b", DATA)
    s1 = snaps.create(a, {"job": "one"}, backend=store.store)
    s2 = snaps.create(a, {"job": "two"}, backend=store.store)
    s3 = snaps.create(b, {"job": "two"}, backend=store.store)
    ids = lambda found: [s.id for s in found]  # noqa: E731
    assert ids(snaps.list(a, backend=store.store)) == [s1.id, s2.id]
    assert ids(snaps.list(labels={"job": "two"}, backend=store.store)) == [s2.id, s3.id]
    assert ids(snaps.list(b, {"job": "one"}, backend=store.store)) == []


def test_restore_gives_the_snapshot_contents_in_a_new_volume_and_leaves_the_source(store):
    vol = store.make_volume("data", DATA)
    snap = snaps.create(vol, backend=store.store)
    store.edit(vol, {"notes.txt": "v2", "label_data.json": None, "extra.txt": "new"})
    after_edit = store.read(vol)
    target = snaps.restore(snap.id, store.target("restored"), backend=store.store)
    assert store.read(target) == DATA
    assert store.read(vol) == after_edit  # the source is never touched


def test_restore_refuses_an_existing_target_and_leaves_it_unchanged(store):
    vol = store.make_volume("data", DATA)
    other = store.make_volume("precious", {"keep.txt": "mine"})
    snap = snaps.create(vol, backend=store.store)
    with pytest.raises(TargetExistsError, match=r"already exists.*never overwrites"):
        snaps.restore(snap.id, other, backend=store.store)
    assert store.read(other) == {"keep.txt": "mine"}


def test_editing_a_restored_file_never_alters_the_stored_version(store):
    vol = store.make_volume("data", DATA)
    snap = snaps.create(vol, backend=store.store)
    first = snaps.restore(snap.id, store.target("first"), backend=store.store)
    assert store.read(first) == DATA
    store.edit(first, {"notes.txt": "scribbled over", "clips/0001/20.jpg": None})
    second = snaps.restore(snap.id, store.target("second"), backend=store.store)
    assert store.read(second) == DATA


def test_delete_removes_the_snapshot_and_later_lookups_say_so(store):
    vol = store.make_volume("data", DATA)
    keep = snaps.create(vol, backend=store.store)
    gone = snaps.create(vol, backend=store.store)
    snaps.delete(gone.id, backend=store.store)
    assert [s.id for s in snaps.list(backend=store.store)] == [keep.id]
    with pytest.raises(SnapshotNotFoundError, match=gone.id):
        snaps.get(gone.id, backend=store.store)
    with pytest.raises(SnapshotNotFoundError):
        snaps.delete(gone.id, backend=store.store)
    assert snaps.verify(keep.id, backend=store.store)  # what other snapshots need is kept
    assert store.read(snaps.restore(keep.id, store.target("back"), backend=store.store)) == DATA


def test_verify_reports_a_restorable_snapshot(store):
    snap = snaps.create(store.make_volume("data", DATA), backend=store.store)
    result = snaps.verify(snap.id, backend=store.store)
    assert result.ok and result.id == snap.id and result.detail


@pytest.mark.parametrize("call, match", [
    (lambda s, v: snaps.create(v, {"job": "a/b"}, backend=s), r"label job='a/b' is not valid"),
    (lambda s, v: snaps.create(v, {"bad key!": "x"}, backend=s), r"label key 'bad key!' is not valid"),
    (lambda s, v: snaps.create(v, {"lanenb.name": "x"}, backend=s), r"label key 'lanenb.name'"),
    (lambda s, v: snaps.create(v, name="Not_A_Name", backend=s), r"snapshot name 'Not_A_Name' is not valid"),
    (lambda s, v: snaps.create(v, name="run..1", backend=s), r"snapshot name 'run\.\.1' is not valid"),
    (lambda s, v: snaps.create("no-such-volume", backend=s), r"no-such-volume"),
])
def test_bad_input_is_refused_naming_the_bad_value(store, call, match):
    vol = store.make_volume("data", DATA)
    with pytest.raises(SnapshotInputError, match=match) as info:
        call(store.store, vol)
    assert isinstance(info.value, (UserError, ValueError))
    assert snaps.list(backend=store.store) == []  # nothing half-made


def test_unknown_ids_and_bad_targets_get_clear_errors(store):
    snap = snaps.create(store.make_volume("data", DATA), backend=store.store)
    with pytest.raises(SnapshotNotFoundError, match="ffffeeee"):
        snaps.get("ffffeeee", backend=store.store)
    with pytest.raises(SnapshotNotFoundError, match="ffffeeee"):
        snaps.restore("ffffeeee", store.target("x"), backend=store.store)
    with pytest.raises(SnapshotInputError, match="restore target"):
        snaps.restore(snap.id, "", backend=store.store)


def test_diff_lists_changes_with_sizes_or_says_it_is_not_available(store):
    vol = store.make_volume("data", DATA)
    a = snaps.create(vol, backend=store.store)
    store.edit(vol, {"notes.txt": "version 2!", "label_data.json": None, "extra.txt": "new"})
    b = snaps.create(vol, backend=store.store)
    if not store.can_diff:
        with pytest.raises(SnapshotNotSupportedError, match="diff is not available on kubernetes snapshots"):
            snaps.diff(a.id, b.id, backend=store.store)
        return
    d = snaps.diff(a.id, b.id, backend=store.store)
    assert [(c.path, c.size_before, c.size_after) for c in d.added] == [("/extra.txt", None, 3)]
    assert [(c.path, c.size_before, c.size_after) for c in d.removed] == [("/label_data.json", 14, None)]
    assert [(c.path, c.size_before, c.size_after) for c in d.changed] == [("/notes.txt", 2, 10)]


def test_every_call_taking_an_id_takes_the_snapshot_object_too(store):
    """What ``create`` returned can be passed straight back: get, restore, verify, files, diff,
    delete, on the module functions and on the store methods alike."""
    vol = store.make_volume("data", DATA)
    a = snaps.create(vol, backend=store.store)
    store.edit(vol, {"extra.txt": "new"})
    b = snaps.create(vol, backend=store.store)
    assert snaps.get(a, backend=store.store) == a
    assert store.store.get(b) == b
    assert store.read(snaps.restore(a, store.target("from-object"), backend=store.store)) == DATA
    assert snaps.verify(b, backend=store.store).id == b.id
    assert store.store.verify(a).ok
    if store.can_diff:
        assert [c.path for c in snaps.diff(a, b, backend=store.store).added] == ["/extra.txt"]
        assert [c.path for c in store.store.diff(a.id, b).added] == ["/extra.txt"]
        assert "/extra.txt" in {f.path for f in snaps.files(b, backend=store.store)}
    snaps.delete(a, backend=store.store)
    store.store.delete(b)
    assert snaps.list(backend=store.store) == []


@pytest.mark.parametrize("bad", [None, "", "  ", 42, ["abc"]])
def test_an_id_that_is_neither_a_snapshot_nor_a_string_is_refused_naming_it(store, bad):
    with pytest.raises(SnapshotInputError, match=r"snapshot id .*must be a Snapshot or a non-empty string.*got "
                                                 + re.escape(repr(bad))):
        snaps.get(bad, backend=store.store)
    with pytest.raises(SnapshotInputError, match=re.escape(repr(bad))):
        snaps.restore(bad, store.target("never"), backend=store.store)
    with pytest.raises(SnapshotInputError, match=re.escape(repr(bad))):
        snaps.delete(bad, backend=store.store)
