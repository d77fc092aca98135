"""The Kubernetes test fixtures (emulator thread, fake operator, kubeconfig, backend), in a module
of their own so every test folder that needs a cluster imports them into its conftest."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_operator import FakeCluster
from k8s_harness import crd_schema, start_emulator


@pytest.fixture(scope="session")
def mpijob_schema() -> dict:
    return crd_schema("kubeflow.org_mpijobs.yaml")


@pytest.fixture(scope="session")
def snapshot_schema() -> dict:
    return crd_schema("snapshot.storage.k8s.io_volumesnapshots.yaml")


@pytest.fixture
def cluster(tmp_path):
    """(emulator thread, fake cluster) with the MPI Operator installed; stopped after the test."""
    thread = start_emulator()
    fake = FakeCluster(thread.emulator, workdir=str(tmp_path)).attach()
    thread.start()
    yield thread, fake
    thread.call(fake.shutdown)
    thread.stop()


@pytest.fixture
def bare_cluster():
    """The emulator alone (no fake operator), for testing the harness itself."""
    thread = start_emulator().start()
    yield thread, None
    thread.stop()


@pytest.fixture
def kubeconfig(cluster, tmp_path) -> Path:
    return cluster[0].write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def backend(kubeconfig):
    from lanenb.backends.kubernetes.backend import KubernetesBackend, RetryPolicy

    return KubernetesBackend(kubeconfig=kubeconfig, retry=RetryPolicy(attempts=4, base_delay=0.02, max_delay=0.1))
