"""The Kubernetes store's own behaviour: default class, objects valid against the CRDs,
status.error in words, nothing half-made left, restored PVCs sized from restoreSize."""

from __future__ import annotations

import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from fake_snapshot_controller import DRIVER, SNAPSHOT_CLASS, STORAGE_CLASS
from kube_emulator import PVCS, SNAPSHOT_CLASSES, SNAPSHOTS

import lanenb.snapshots as snaps
from lanenb.snapshots import SnapshotFailedError, SnapshotInputError
from lanenb.snapshots.csi import CsiStore


@pytest.fixture
def csi(csi_cluster):
    thread, controller, kubeconfig = csi_cluster
    store = CsiStore("default", kubeconfig=str(kubeconfig), timeout=10, poll=0.05)
    return thread, controller, store


def test_the_snapshot_uses_the_drivers_default_class_and_validates_against_the_crd(csi, snapshot_schema):
    thread, controller, store = csi
    thread.call(controller.add_pvc, "data", "3Gi")
    snap = store.create("data", {"job": "lane-7"})
    obj = thread.call(thread.emulator.get, SNAPSHOTS, "default", snap.id)
    jsonschema.validate(obj, snapshot_schema)
    assert obj["spec"] == {"source": {"persistentVolumeClaimName": "data"}, "volumeSnapshotClassName": SNAPSHOT_CLASS}
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "lanenb", "lanenb.io/job": "lane-7"}
    assert snap.size == 3 * 2**30 and snap.ready


def test_a_non_default_class_for_the_driver_is_not_picked_silently(csi):
    thread, controller, store = csi

    def demote():
        thread.emulator.patch(SNAPSHOT_CLASSES, None, SNAPSHOT_CLASS, {"metadata": {"annotations": None}})
        controller.add_pvc("data")

    thread.call(demote)
    with pytest.raises(SnapshotInputError, match=f"no default VolumeSnapshotClass for driver '{DRIVER}'.*"
                                                 f"{SNAPSHOT_CLASS}.*snapshot_class="):
        store.create("data")
    named = CsiStore("default", kubeconfig=store.kubeconfig, snapshot_class=SNAPSHOT_CLASS, timeout=10, poll=0.05)
    assert named.create("data").ready


def test_a_pvc_without_storage_class_needs_an_explicit_class(csi):
    thread, controller, store = csi
    thread.call(controller.add_pvc, "bare", "1Gi", "default", None)
    with pytest.raises(SnapshotInputError, match="PVC 'bare' names no storageClassName"):
        store.create("bare")


def test_a_failed_snapshot_raises_the_storage_error_in_words_and_is_deleted(csi):
    thread, controller, store = csi
    thread.call(controller.add_pvc, "data")
    controller.fail["data"] = "rpc error: code = ResourceExhausted desc = snapshot quota exceeded"
    with pytest.raises(SnapshotFailedError, match=r"VolumeSnapshot '.*' of PVC 'data' failed: .*quota exceeded"):
        store.create("data", name="doomed")
    assert thread.call(thread.emulator.get, SNAPSHOTS, "default", "doomed") is None
    assert store.list() == []


def test_restore_is_a_new_pvc_from_the_snapshot_at_least_restore_size(csi):
    thread, controller, store = csi
    thread.call(controller.add_pvc, "data", "5Gi")
    snap = store.create("data")
    assert store.restore(snap.id, "data-v1") == "data-v1"
    pvc = thread.call(thread.emulator.get, PVCS, "default", "data-v1")
    assert pvc["spec"]["dataSource"] == {"kind": "VolumeSnapshot", "apiGroup": "snapshot.storage.k8s.io",
                                         "name": snap.id}
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert pvc["spec"]["storageClassName"] == STORAGE_CLASS
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_a_missing_pvc_is_named(csi):
    _, _, store = csi
    with pytest.raises(SnapshotInputError, match="PVC 'nope' not found in namespace 'default'"):
        snaps.create("nope", backend=store)
