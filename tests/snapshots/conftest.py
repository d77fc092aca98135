"""Fixtures: an isolated LANENB_HOME, and a ``store`` harness parametrised over both snapshot
stores (local restic; Kubernetes VolumeSnapshots on the emulator with the fake CSI controller)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from k8s_fixtures import snapshot_schema  # noqa: F401  (a fixture: pytest finds it by name)
from snapshot_support import KubernetesHarness, LocalHarness

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


@pytest.fixture(scope="session")
def empty_restic_store(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """One empty restic repository (and its password file) made once per session: ``restic
    init`` calibrates its key derivation (~1 s), so each test gets a copy instead."""
    if shutil.which("restic") is None:
        return None
    from lanenb.snapshots.local import ResticStore

    root = tmp_path_factory.mktemp("restic-template") / "snapshots"
    ResticStore(root)._ensure_repo()
    return root


@pytest.fixture(autouse=True)
def lanenb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_restic_store: Path | None) -> Path:
    """A private LANENB_HOME per test, its snapshot store a fresh copy of the empty template."""
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    if empty_restic_store is not None:
        shutil.copytree(empty_restic_store, home / "snapshots")
    return home


@pytest.fixture
def restic_installed() -> None:
    if shutil.which("restic") is None:
        pytest.skip("restic is not installed (Debian package restic; scripts/setup.sh)")


@pytest.fixture
def csi_cluster(tmp_path: Path):
    """(emulator thread, snapshot controller, kubeconfig) with no MPI operator."""
    from fake_snapshot_controller import FakeSnapshotController
    from k8s_harness import start_emulator

    thread = start_emulator(operator_installed=False)
    controller = FakeSnapshotController(thread.emulator, root=tmp_path / "csi").attach()
    thread.start()
    yield thread, controller, thread.write_kubeconfig(tmp_path / "kubeconfig")
    thread.stop()


@pytest.fixture(params=["local", "kubernetes"])
def store(request, tmp_path: Path):
    if request.param == "local":
        if shutil.which("restic") is None:
            pytest.skip("restic is not installed")
        return LocalHarness(tmp_path)
    thread, controller, kubeconfig = request.getfixturevalue("csi_cluster")
    return KubernetesHarness(tmp_path, thread, controller, kubeconfig)
