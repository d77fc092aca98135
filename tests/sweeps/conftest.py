"""Sweeps run real trials (mpirun ranks of the small SCNN) in an isolated LANENB_HOME; trials on
the kubernetes backend run against the emulator fixtures of ``tests/k8s/k8s_fixtures``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from homes import lanenb_home  # noqa: F401

sys.path.insert(0, str(Path(__file__).parents[1] / "k8s"))
from k8s_fixtures import cluster, kubeconfig  # noqa: F401


@pytest.fixture(scope="session")
def sweep_data(tmp_path_factory) -> Path:
    from lanenb_trainer.data.synth import synthesize

    root = tmp_path_factory.mktemp("sweep") / "tusimple"
    synthesize(root, 60, seed=0, width=320, height=180, test_fraction=0.2, progress=False)
    return root
