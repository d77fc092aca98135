"""Shared helpers of the Kubernetes tests (a uniquely named module: every test folder has its own
``conftest``, so tests and benches import helpers from here, never ``from conftest import``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from kube_emulator import (
    EVENTS,
    JOBS,
    MPIJOBS,
    NETWORK_POLICIES,
    NODES,
    PODS,
    PVCS,
    SECRETS,
    SNAPSHOTS,
    EmulatorThread,
    KubeEmulator,
)

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """``shared/`` beside the repository (as CI clones it), or ``$LANENB_SHARED``."""
    override = os.environ.get("LANENB_SHARED")
    path = Path(override) if override else REPO.parent / "shared"
    if not (path / "crds").is_dir():
        pytest.skip(f"shared/ with crds/ not found at {path} (clone it beside the repo or set LANENB_SHARED)")
    return path


def crd_schema(filename: str) -> dict:
    crd = yaml.safe_load((shared_dir() / "crds" / filename).read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("served", True))
    return version["schema"]["openAPIV3Schema"]


def start_emulator(*, operator_installed: bool = True) -> EmulatorThread:
    emu = KubeEmulator()
    builtin = (PODS, PVCS, SNAPSHOTS, NODES, EVENTS, JOBS, SECRETS, NETWORK_POLICIES)
    for res in builtin + ((MPIJOBS,) if operator_installed else ()):
        emu.install(res)
    return EmulatorThread(emu)


def add_pvc(thread: EmulatorThread, name: str = "data", namespace: str = "default") -> dict:
    """A bound PVC the fake scheduler finds (the jobs mount their data and run dir from it)."""
    return thread.call(thread.emulator.create, PVCS, namespace, {
        "metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteMany"],
                                            "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"}})


def warm_up(backend) -> None:
    """The kubernetes client builds its pydantic validators on the first call of each API class
    (~1-3 s for CoreV1Api on a busy machine); timing-sensitive tests do that before submitting."""
    from lanenb.backends.kubernetes.launcher_log import pod_dicts
    from lanenb.contract.spec import TrainSpec

    pod_dicts(backend.clients(), "default", "warm-up")
    spec = TrainSpec(dataset="/d", backend="kubernetes", image="img:1", name="warm-up", namespace="default")
    backend.status(spec, {"name": "warm-up", "namespace": "default"})
