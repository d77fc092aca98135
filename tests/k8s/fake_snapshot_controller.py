"""A test-only CSI snapshot controller + hostpath-like CSI driver living in the emulator's loop.

What the external-snapshotter and a CSI driver do, in miniature: a VolumeSnapshot of an
existing PVC with a known VolumeSnapshotClass becomes ``readyToUse`` with ``restoreSize``
(the PVC's requested size) and a bound content name; anything else, or a PVC named in
``fail``, gets ``status.error`` instead. A PVC created with ``dataSource: VolumeSnapshot``
is bound when the snapshot is ready and the size is at least ``restoreSize``, else stays
``Pending`` with a condition saying why.

Like the hostpath driver, each PVC's data is a directory (``volume_dir(name)``): a snapshot
copies it, a restored PVC starts as a copy of the snapshot, so tests can check contents.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kube_emulator import PVCS, SNAPSHOT_CLASSES, SNAPSHOTS, STORAGE_CLASSES, KubeEmulator, now_rfc3339

DRIVER = "hostpath.csi.k8s.io"
STORAGE_CLASS = "csi-hostpath-sc"
SNAPSHOT_CLASS = "csi-hostpath-snapclass"


def _bytes(quantity: str) -> int:
    from kubernetes.utils import parse_quantity

    return int(parse_quantity(quantity))


@dataclass
class FakeSnapshotController:
    emulator: KubeEmulator
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fake-csi-")))
    fail: dict[str, str] = field(default_factory=dict)  # PVC name -> error message for its snapshots
    delay: float = 0.05  # seconds before the controller answers (readyToUse is never immediate)

    def attach(self, *, default_class: bool = True) -> FakeSnapshotController:
        """Install the snapshot CRDs' resources, one StorageClass for the driver and its
        (default) VolumeSnapshotClass; call before the emulator thread starts, or through
        ``thread.call``."""
        for res in (SNAPSHOTS, SNAPSHOT_CLASSES, STORAGE_CLASSES):
            self.emulator.install(res)
        self.emulator.create(STORAGE_CLASSES, None, {"metadata": {"name": STORAGE_CLASS}, "provisioner": DRIVER,
                                                     "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
        annotations = {"snapshot.storage.kubernetes.io/is-default-class": "true"} if default_class else {}
        self.emulator.create(SNAPSHOT_CLASSES, None, {
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
            "metadata": {"name": SNAPSHOT_CLASS, "annotations": annotations},
            "driver": DRIVER, "deletionPolicy": "Delete"})
        self.emulator.hooks.append(self.on_event)
        return self

    # ------------------------------------------------------------------ data
    def volume_dir(self, pvc: str, namespace: str = "default") -> Path:
        return self.root / "volumes" / namespace / pvc

    def _snapshot_dir(self, name: str, namespace: str) -> Path:
        return self.root / "snapshots" / namespace / name

    def add_pvc(self, name: str, size: str = "1Gi", namespace: str = "default",
                storage_class: str | None = STORAGE_CLASS) -> Path:
        """A bound PVC (in the emulator's loop) and its data directory."""
        spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
        if storage_class:
            spec["storageClassName"] = storage_class
        self.emulator.create(PVCS, namespace, {"metadata": {"name": name}, "spec": spec,
                                               "status": {"phase": "Bound", "capacity": {"storage": size}}})
        path = self.volume_dir(name, namespace)
        path.mkdir(parents=True, exist_ok=True)
        return path

    # ------------------------------------------------------------------ controller
    async def on_event(self, kind: str, res: tuple, obj: dict) -> None:
        if kind != "ADDED":
            if kind == "DELETED" and res == SNAPSHOTS:
                shutil.rmtree(self._snapshot_dir(obj["metadata"]["name"], obj["metadata"]["namespace"]),
                              ignore_errors=True)
            return
        if res == SNAPSHOTS:
            await asyncio.sleep(self.delay)
            self._take(obj)
        elif res == PVCS and ((obj.get("spec") or {}).get("dataSource") or {}).get("kind") == "VolumeSnapshot":
            await asyncio.sleep(self.delay)
            self._restore(obj)

    def _set_status(self, res: tuple, ns: str, name: str, status: dict) -> None:
        if self.emulator.get(res, ns, name) is not None:
            self.emulator.patch(res, ns, name, {"status": status}, status_only=True)

    def _take(self, snap: dict) -> None:
        ns, name = snap["metadata"]["namespace"], snap["metadata"]["name"]
        source = (snap.get("spec") or {}).get("source") or {}
        pvc_name = source.get("persistentVolumeClaimName")
        cls = (snap.get("spec") or {}).get("volumeSnapshotClassName")
        pvc = self.emulator.get(PVCS, ns, pvc_name) if pvc_name else None
        if cls is None and pvc is not None:  # the common controller's default class for the PVC's driver
            cls = self._default_class(pvc)
        error = None
        if pvc is None:
            error = (f"failed to get input parameters to create snapshot {name}: "
                     f'"persistentvolumeclaim {pvc_name} not found"')
        elif cls is None or self.emulator.get(SNAPSHOT_CLASSES, None, cls) is None:
            error = f'failed to get input parameters to create snapshot {name}: "volumesnapshotclass {cls} not found"'
        elif pvc_name in self.fail:
            error = self.fail[pvc_name]
        if error is not None:
            self._set_status(SNAPSHOTS, ns, name,
                             {"readyToUse": False, "error": {"message": error, "time": now_rfc3339()}})
            return
        src = self.volume_dir(pvc_name, ns)
        dst = self._snapshot_dir(name, ns)
        if src.is_dir():
            shutil.copytree(src, dst)
        self._set_status(SNAPSHOTS, ns, name, {
            "boundVolumeSnapshotContentName": f"snapcontent-{snap['metadata']['uid']}",
            "creationTime": now_rfc3339(nano=True), "readyToUse": True,
            "restoreSize": pvc["spec"]["resources"]["requests"]["storage"]})

    def _default_class(self, pvc: dict) -> str | None:
        sc = self.emulator.get(STORAGE_CLASSES, None, (pvc.get("spec") or {}).get("storageClassName") or "")
        for cls in self.emulator.list(SNAPSHOT_CLASSES, None) if sc else []:
            default = (cls["metadata"].get("annotations") or {}).get("snapshot.storage.kubernetes.io/is-default-class")
            if default == "true" and cls.get("driver") == sc.get("provisioner"):
                return cls["metadata"]["name"]
        return None

    def _restore(self, pvc: dict) -> None:
        ns, name = pvc["metadata"]["namespace"], pvc["metadata"]["name"]
        source = pvc["spec"]["dataSource"].get("name")
        snap = self.emulator.get(SNAPSHOTS, ns, source)
        requested = pvc["spec"].get("resources", {}).get("requests", {}).get("storage", "0")
        why = None
        if snap is None or not (snap.get("status") or {}).get("readyToUse"):
            why = f"VolumeSnapshot {source} is not ready or does not exist"
        elif _bytes(requested) < _bytes(snap["status"]["restoreSize"]):
            why = f"requested {requested} is less than the snapshot's restoreSize {snap['status']['restoreSize']}"
        if why is not None:
            self._set_status(PVCS, ns, name, {"phase": "Pending", "conditions": [
                {"type": "Resizing", "status": "False", "reason": "ProvisioningFailed", "message": why}]})
            return
        src, dst = self._snapshot_dir(source, ns), self.volume_dir(name, ns)
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            dst.mkdir(parents=True, exist_ok=True)
        self._set_status(PVCS, ns, name, {"phase": "Bound", "capacity": {"storage": requested}})
