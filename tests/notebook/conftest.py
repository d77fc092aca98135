"""Fixtures for the notebook layer: an isolated LANENB_HOME, an IPython shell with the extension
loaded, and a ``scripted`` job backend that runs ``scripted_rank.py`` under the real mpirun."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from homes import isolated_home
from notebook_support import run_script

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def lanenb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = isolated_home(tmp_path, monkeypatch)
    monkeypatch.setenv("LANENB_DATA_ROOTS", str(tmp_path))
    return home


@pytest.fixture(scope="session", autouse=True)
def ip():
    """The IPython shell with ``%load_ext lanenb`` done (what a notebook user types first).

    Started before any test: widgets displayed without a shell would otherwise create a plain
    ``InteractiveShell`` singleton that the test shell cannot replace."""
    from ipshell import session_shell

    return session_shell()


@pytest.fixture
def scripted(tmp_path: Path):
    """``scripted(steps)`` registers backend ``scripted`` replaying ``steps`` and returns a spec dict."""
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    from lanenb.backends.local.backend import LocalBackend
    from lanenb.contract.backends import _REGISTRY, register_backend

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)

    def make(steps: list[dict], name: str = "script") -> dict:
        script = run_script(steps, tmp_path / f"{name}.jsonl")
        program = [sys.executable, str(HERE / "scripted_rank.py"), str(script)]
        register_backend("scripted", lambda **kw: LocalBackend(program=program, trainer_args=False, grace=2.0))
        # a replay, not training: its ranks may outnumber the cores (a 4-rank scaling script on 2)
        return {"dataset": str(data), "processes": 2, "backend": "scripted", "local": {"oversubscribe": True}}

    yield make
    _REGISTRY.pop("scripted", None)


# the Kubernetes emulator fixtures (cluster, backend, kubeconfig) for notebook tests
sys.path.insert(0, str(HERE.parent / "k8s"))
from k8s_fixtures import backend, cluster, kubeconfig  # noqa: E402,F401
