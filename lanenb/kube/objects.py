"""Kubernetes objects of the snapshot store: a CSI ``VolumeSnapshot`` of a PVC and a PVC
restored from one (the RUN:AI guide's ML-versioning steps)."""

from __future__ import annotations

from typing import Any

from lanenb.kube.names import check_label, check_subdomain

__all__ = ["build_volume_snapshot", "build_restored_pvc", "MANAGED_BY"]

MANAGED_BY = "lanenb"


def build_volume_snapshot(pvc_name: str, snapshot_name: str, namespace: str,
                          snapshot_class: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A CSI VolumeSnapshot of ``pvc_name`` (the RUN:AI guide's ML-versioning step)."""
    check_subdomain("pvc_name", pvc_name)
    check_subdomain("snapshot name", snapshot_name)
    check_label("namespace", namespace)
    body: dict[str, Any] = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": snapshot_name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, **(labels or {})}},
        "spec": {"source": {"persistentVolumeClaimName": pvc_name}},
    }
    if snapshot_class:
        body["spec"]["volumeSnapshotClassName"] = check_subdomain("snapshot_class", snapshot_class)
    return body


def build_restored_pvc(snapshot_name: str, pvc_name: str, namespace: str, size: str,
                       storage_class: str | None = None, access_modes: list[str] | None = None) -> dict[str, Any]:
    """A new PVC whose data comes from a VolumeSnapshot (restore, then retrain from it)."""
    check_subdomain("snapshot name", snapshot_name)
    check_subdomain("pvc_name", pvc_name)
    check_label("namespace", namespace)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": pvc_name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}},
        "spec": {
            "accessModes": access_modes or ["ReadWriteMany"],
            "resources": {"requests": {"storage": size}},
            "dataSource": {"kind": "VolumeSnapshot", "apiGroup": "snapshot.storage.k8s.io", "name": snapshot_name},
        },
    }
    if storage_class:
        body["spec"]["storageClassName"] = storage_class
    return body
