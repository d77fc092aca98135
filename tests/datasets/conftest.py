"""Fixtures of the dataset-fetch tests (helpers live in ``fetch_support``; the Kubernetes emulator
fixtures come from ``tests/k8s/k8s_fixtures``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "k8s"))

from fetch_support import LoopbackServer, build_tusimple_tree, mount_tmpfs, tusimple_archives, unmount  # noqa: E402
from k8s_fixtures import cluster, kubeconfig  # noqa: E402,F401


@pytest.fixture(scope="session")
def tusimple_tree(tmp_path_factory) -> Path:
    """A small TuSimple root in the official layout (what the three archives unpack to)."""
    return build_tusimple_tree(tmp_path_factory.mktemp("tree") / "tusimple")


@pytest.fixture(scope="session")
def archives(tusimple_tree) -> dict[str, bytes]:
    return tusimple_archives(tusimple_tree)


@pytest.fixture
def server(archives):
    srv = LoopbackServer(archives).start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No user config or mirror variables leak into a test."""
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    for name in ("LANENB_TUSIMPLE_MIRRORS", "LANENB_CULANE_MIRRORS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (root only); unmounted after the test."""
    path = tmp_path / "small"
    if not mount_tmpfs(path, "2m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield path
    unmount(path)
