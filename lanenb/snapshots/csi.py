"""The Kubernetes snapshot store: CSI ``VolumeSnapshot`` objects (``snapshot.storage.k8s.io/v1``).

A volume is a PVC. ``create`` picks the VolumeSnapshotClass (given, or the cluster's default
class for the PVC's CSI driver: the class whose ``driver`` is the StorageClass's provisioner
and which carries ``snapshot.storage.kubernetes.io/is-default-class: "true"``), labels the
object with the job, waits for ``status.readyToUse`` and reports ``status.error`` in words.
``restore`` is a new PVC in the same namespace with ``dataSource: VolumeSnapshot`` and a size
>= ``status.restoreSize``. CSI snapshots are opaque copies made by the storage system, so
there is no ``diff`` and no file list.

A failed or timed-out snapshot is deleted before the error is raised: nothing half-made stays
visible in ``list``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any

from lanenb.snapshots.base import (
    Snapshot,
    SnapshotError,
    SnapshotFailedError,
    SnapshotInputError,
    SnapshotNotFoundError,
    SnapshotStore,
    TargetExistsError,
    Verification,
    check_labels,
    check_name,
    parse_time,
    snapshot_id,
)
from lanenb_trainer.k8s_snapshot import LABEL_PREFIX, slug

__all__ = ["CsiStore", "GROUP", "VERSION", "LABEL_PREFIX", "DEFAULT_CLASS_ANNOTATION"]

GROUP, VERSION = "snapshot.storage.k8s.io", "v1"
MANAGED = "app.kubernetes.io/managed-by"
DEFAULT_CLASS_ANNOTATION = "snapshot.storage.kubernetes.io/is-default-class"


def _bytes(quantity: Any) -> int | None:
    if quantity in (None, ""):
        return None
    from kubernetes.utils import parse_quantity

    return int(parse_quantity(str(quantity)))


def _quantity(size: int) -> str:
    for suffix, factor in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{suffix}"
    return str(size)


class CsiStore(SnapshotStore):
    """VolumeSnapshots of PVCs in one namespace.

    Args:
        namespace: where the PVCs and snapshots live.
        kubeconfig, context: as for the Kubernetes job backend (default: ``$KUBECONFIG``, or the
            pod's service account inside a cluster).
        snapshot_class: a VolumeSnapshotClass name (default: the driver's default class).
        timeout: seconds to wait for ``readyToUse``.
        clients: ready-made ``lanenb.kube.client.Clients`` (tests, reuse).
    """

    namespaced = True

    name = "kubernetes"

    def __init__(self, namespace: str = "default", *, kubeconfig: Any = None, context: str | None = None,
                 snapshot_class: str | None = None, timeout: float = 300.0, poll: float = 0.2,
                 clients: Any = None) -> None:
        from lanenb.kube.names import check_label

        self.namespace = check_label("namespace", namespace)
        self.kubeconfig, self.context = kubeconfig, context
        self.snapshot_class = snapshot_class
        self.timeout, self.poll = float(timeout), float(poll)
        self._clients = clients

    # ------------------------------------------------------------------ plumbing
    @property
    def clients(self) -> Any:
        if self._clients is None:
            from lanenb.kube.client import load_clients

            self._clients = load_clients(self.context, self.kubeconfig)
        return self._clients

    def _call(self, fn: Any, *args: Any, what: str, **kwargs: Any) -> Any:
        return self.clients.call(fn, *args, what=what, **kwargs)

    def _missing(self, exc: Exception) -> bool:
        from kubernetes.client.exceptions import ApiException

        return isinstance(exc, ApiException) and exc.status == 404

    def _object(self, name: str) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        check_name(name)
        try:
            return self._call(self.clients.custom.get_namespaced_custom_object, GROUP, VERSION, self.namespace,
                              "volumesnapshots", name, what=f"reading VolumeSnapshot {name}")
        except ApiException as exc:
            if exc.status == 404:
                raise SnapshotNotFoundError(f"no VolumeSnapshot {name!r} in namespace {self.namespace!r}") from None
            raise SnapshotError(f"reading VolumeSnapshot {name!r} failed: {exc.status} {exc.reason}") from exc

    def _pvc(self, name: str) -> Any | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return self._call(self.clients.core.read_namespaced_persistent_volume_claim, name, self.namespace,
                              what=f"reading PVC {name}")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise SnapshotError(f"reading PVC {name!r} failed: {exc.status} {exc.reason}") from exc

    def _to_snapshot(self, obj: dict[str, Any]) -> Snapshot:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        labels = {k[len(LABEL_PREFIX):]: v for k, v in (meta.get("labels") or {}).items() if k.startswith(LABEL_PREFIX)}
        error = (status.get("error") or {}).get("message")
        source = (spec.get("source") or {}).get("persistentVolumeClaimName") or ""
        return Snapshot(id=meta["name"], name=meta["name"], volume=source,
                        created=parse_time(status.get("creationTime") or meta.get("creationTimestamp")),
                        size=_bytes(status.get("restoreSize")), labels=labels,
                        ready=bool(status.get("readyToUse")), backend=self.name, error=error)

    def default_class(self, pvc: Any) -> str:
        """The VolumeSnapshotClass marked default for the CSI driver that provisions ``pvc``."""
        from kubernetes import client as k8s
        from kubernetes.client.exceptions import ApiException

        sc_name = pvc.spec.storage_class_name
        if not sc_name:
            raise SnapshotInputError(f"PVC {pvc.metadata.name!r} names no storageClassName, so its CSI driver is "
                                     "unknown: pass snapshot_class=...")
        try:
            sc = self._call(k8s.StorageV1Api(self.clients.api).read_storage_class, sc_name,
                            what=f"reading StorageClass {sc_name}")
        except ApiException as exc:
            raise SnapshotInputError(f"StorageClass {sc_name!r} of PVC {pvc.metadata.name!r} cannot be read "
                                     f"({exc.status}): pass snapshot_class=...") from exc
        classes = self._call(self.clients.custom.list_cluster_custom_object, GROUP, VERSION, "volumesnapshotclasses",
                             what="listing VolumeSnapshotClasses").get("items", [])
        same = [c for c in classes if c.get("driver") == sc.provisioner]
        default = [c["metadata"]["name"] for c in same
                   if (c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"]
        if len(default) == 1:
            return default[0]
        names = ", ".join(c["metadata"]["name"] for c in same) or "none"
        if not default:
            raise SnapshotInputError(f"no default VolumeSnapshotClass for driver {sc.provisioner!r} (classes for it: "
                                     f"{names}): pass snapshot_class=... or ask an admin to annotate one with "
                                     f"{DEFAULT_CLASS_ANNOTATION}=true")
        raise SnapshotInputError(f"several default VolumeSnapshotClasses for driver {sc.provisioner!r}: "
                                 f"{', '.join(default)}; pass snapshot_class=...")

    # ------------------------------------------------------------------ API
    def create(self, volume: str, labels: Mapping[str, Any] | None = None, *, name: str | None = None,
               progress: bool = False) -> Snapshot:
        from kubernetes.client.exceptions import ApiException

        from lanenb.kube.objects import build_volume_snapshot

        tags = check_labels(labels)
        if not isinstance(volume, str) or not volume:
            raise SnapshotInputError(f"volume must be a PVC name, got {volume!r}")
        check_name(volume)
        pvc = self._pvc(volume)
        if pvc is None:
            raise SnapshotInputError(f"PVC {volume!r} not found in namespace {self.namespace!r}")
        name = check_name(name) if name is not None else \
            f"{slug(volume, 36)}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        cls = self.snapshot_class or self.default_class(pvc)
        body = build_volume_snapshot(volume, name, self.namespace, cls,
                                     {f"{LABEL_PREFIX}{k}": v for k, v in tags.items()})
        try:
            self._call(self.clients.custom.create_namespaced_custom_object, GROUP, VERSION, self.namespace,
                       "volumesnapshots", body, what=f"creating VolumeSnapshot {name}")
        except ApiException as exc:
            if exc.status == 409:
                raise SnapshotInputError(f"a VolumeSnapshot named {name!r} already exists in namespace "
                                         f"{self.namespace!r}; pick another name") from None
            raise SnapshotError(f"creating VolumeSnapshot {name!r} failed: {exc.status} {exc.reason}") from exc
        try:
            return self._wait_ready(name)
        except BaseException:
            self._delete_quietly(name)  # failed, timed out or interrupted: leave nothing half-made
            raise

    def _wait_ready(self, name: str) -> Snapshot:
        deadline = time.monotonic() + self.timeout
        while True:
            snap = self._to_snapshot(self._object(name))
            if snap.error:
                raise SnapshotFailedError(f"VolumeSnapshot {name!r} of PVC {snap.volume!r} failed: {snap.error}")
            if snap.ready:
                return snap
            if time.monotonic() >= deadline:
                raise SnapshotError(f"VolumeSnapshot {name!r} was not ready to use after {self.timeout:g} s "
                                    "(is the snapshot controller installed?); it was deleted")
            time.sleep(self.poll)

    def _delete_quietly(self, name: str) -> None:
        try:
            self.clients.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, "volumesnapshots", name)
        except Exception:  # best effort: the original error matters more
            pass

    def list(self, volume: str | None = None, labels: Mapping[str, Any] | None = None) -> list[Snapshot]:
        want = check_labels(labels)
        selector = ",".join([f"{MANAGED}=lanenb"] + [f"{LABEL_PREFIX}{k}={v}" for k, v in want.items()])
        items = self._call(self.clients.custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace,
                           "volumesnapshots", label_selector=selector, what="listing VolumeSnapshots").get("items", [])
        snaps = [self._to_snapshot(o) for o in items]
        return sorted([s for s in snaps if volume is None or s.volume == volume], key=lambda s: (s.created, s.id))

    def get(self, id: str | Snapshot) -> Snapshot:
        id = snapshot_id(id, "snapshot id (a VolumeSnapshot name)")
        return self._to_snapshot(self._object(id))

    def restore(self, id: str | Snapshot, new_volume: str, *, progress: bool = False) -> str:
        from kubernetes.client.exceptions import ApiException

        from lanenb.kube.objects import build_restored_pvc

        if not isinstance(new_volume, str) or not new_volume:
            raise SnapshotInputError(f"restore target must be a new PVC name, got {new_volume!r}")
        check_name(new_volume)
        id = snapshot_id(id, "snapshot id (a VolumeSnapshot name)")
        snap = self.get(id)
        if not snap.ready:
            raise SnapshotInputError(f"VolumeSnapshot {id!r} is not ready to use"
                                     + (f": {snap.error}" if snap.error else "") + "; it cannot be restored yet")
        if self._pvc(new_volume) is not None:
            raise TargetExistsError(f"PVC {new_volume!r} already exists in namespace {self.namespace!r}; restore "
                                    "never overwrites data: give a new PVC name")
        source = self._pvc(snap.volume)
        size = snap.size or 0
        storage_class, modes = None, None
        if source is not None:
            requested = _bytes(((source.spec.resources and source.spec.resources.requests) or {}).get("storage"))
            size = max(size, requested or 0)
            storage_class, modes = source.spec.storage_class_name, source.spec.access_modes
        if size <= 0:
            raise SnapshotError(f"VolumeSnapshot {id!r} reports no restoreSize and its PVC {snap.volume!r} is gone: "
                                "the new PVC's size is unknown")
        body = build_restored_pvc(snap.id, new_volume, self.namespace, _quantity(size), storage_class, modes)
        body["metadata"]["labels"].update({f"{LABEL_PREFIX}restored-from": snap.id})
        try:
            self._call(self.clients.core.create_namespaced_persistent_volume_claim, self.namespace, body,
                       what=f"creating PVC {new_volume}")
        except ApiException as exc:
            if exc.status == 409:
                raise TargetExistsError(f"PVC {new_volume!r} already exists in namespace {self.namespace!r}; "
                                        "restore never overwrites data: give a new PVC name") from None
            raise SnapshotError(f"creating PVC {new_volume!r} failed: {exc.status} {exc.reason}") from exc
        return new_volume

    def delete(self, id: str | Snapshot) -> None:
        from kubernetes.client.exceptions import ApiException

        id = snapshot_id(id, "snapshot id (a VolumeSnapshot name)")
        self.get(id)  # a clear "not found" first
        try:
            self._call(self.clients.custom.delete_namespaced_custom_object, GROUP, VERSION, self.namespace,
                       "volumesnapshots", id, what=f"deleting VolumeSnapshot {id}")
        except ApiException as exc:
            if exc.status != 404:
                raise SnapshotError(f"deleting VolumeSnapshot {id!r} failed: {exc.status} {exc.reason}") from exc

    def verify(self, id: str | Snapshot) -> Verification:
        snap = self.get(id)
        if snap.error:
            return Verification(snap.id, False, f"the storage system reports: {snap.error}")
        if not snap.ready:
            return Verification(snap.id, False, "not ready to use yet")
        return Verification(snap.id, True, f"ready to use, restore size {snap.size} bytes")
