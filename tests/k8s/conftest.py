"""Fixtures: a kmock-based Kubernetes API emulator in a thread, a fake MPI operator/kubelet,
a kubeconfig pointing at it, and the CRD schemas from ``shared/`` (``LANENB_SHARED`` overrides).
They live in ``k8s_fixtures`` so other test folders can use them too."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from k8s_fixtures import backend, bare_cluster, cluster, kubeconfig, mpijob_schema, snapshot_schema  # noqa: F401
