"""Fixtures: an isolated LANENB_HOME with a fresh restic store, and a ``store`` harness parametrised
over both snapshot stores (local restic; Kubernetes VolumeSnapshots on the emulator with the fake CSI
controller)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

# autouse: every test gets its own LANENB_HOME, its snapshot store a copy of one empty restic repository
from homes import empty_restic_store, fresh_restic_store, lanenb_home  # noqa: F401
from k8s_fixtures import snapshot_schema  # noqa: F401  (a fixture: pytest finds it by name)
from snapshot_support import KubernetesHarness, LocalHarness


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
