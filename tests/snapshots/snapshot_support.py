"""The two snapshot stores behind one test harness, so one contract test runs on both.

A harness makes volumes with files, reads them back and names new restore targets: a
directory for the local (restic) store, a PVC whose data lives in the fake CSI driver's
directory for the Kubernetes store.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))


def write_files(root: Path, files: dict[str, str | None]) -> None:
    """Write ``files`` (relative path -> text; ``None`` deletes) under ``root``."""
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def read_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


class LocalHarness:
    backend = "local"
    can_diff = True

    def __init__(self, tmp_path: Path) -> None:
        from lanenb.snapshots.local import ResticStore

        self.tmp = tmp_path
        self.store = ResticStore()

    def make_volume(self, name: str, files: dict[str, str | None]) -> str:
        root = self.tmp / name
        root.mkdir(parents=True)
        write_files(root, files)
        return str(root)

    def path(self, volume: str) -> Path:
        return Path(volume)

    def edit(self, volume: str, files: dict[str, str | None]) -> None:
        write_files(self.path(volume), files)

    def read(self, volume: str) -> dict[str, str]:
        return read_files(self.path(volume))

    def target(self, name: str) -> str:
        return str(self.tmp / name)

    def exists(self, volume: str) -> bool:
        return self.path(volume).exists()


class KubernetesHarness(LocalHarness):
    backend = "kubernetes"
    can_diff = False

    def __init__(self, tmp_path: Path, thread: Any, controller: Any, kubeconfig: Path) -> None:
        from lanenb.snapshots.csi import CsiStore

        self.tmp = tmp_path
        self.thread, self.controller = thread, controller
        self.store = CsiStore("default", kubeconfig=str(kubeconfig), timeout=20, poll=0.05)

    def make_volume(self, name: str, files: dict[str, str | None]) -> str:
        root = self.thread.call(self.controller.add_pvc, name, "2Gi")
        write_files(root, files)
        return name

    def path(self, volume: str) -> Path:
        return self.controller.volume_dir(volume)

    def target(self, name: str) -> str:
        return name

    def exists(self, volume: str) -> bool:
        from kube_emulator import PVCS

        return self.thread.call(self.thread.emulator.get, PVCS, "default", volume) is not None

    def read(self, volume: str) -> dict[str, str]:
        """A restored PVC's data appears once the fake driver provisioned it."""
        import time

        deadline = time.monotonic() + 10
        while not self.path(volume).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return read_files(self.path(volume))


def counting_restic(directory: Path) -> tuple[str, Path]:
    """A ``restic`` that logs each sub-command to a file, then runs the real restic: how many
    times a store operation opens the repository (each open costs ~0.5 s of key derivation)."""
    import shutil

    real = shutil.which("restic")
    assert real is not None
    log = directory / "restic-calls.log"
    wrapper = directory / "restic-counting"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper), log


def calls(log: Path) -> list[str]:
    """The restic sub-commands logged so far (and forget them)."""
    found = log.read_text().split() if log.exists() else []
    log.write_text("")
    return found
