"""Fixtures for the notebook layer: an isolated LANENB_HOME, an IPython shell with the extension
loaded, and a ``scripted`` job backend that runs ``scripted_rank.py`` under the real mpirun."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from homes import lanenb_home  # noqa: F401  (autouse: every test gets its own LANENB_HOME)
from notebook_support import run_script

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def data_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The data a test makes under its tmp_path is inside the allowed data roots."""
    monkeypatch.setenv("LANENB_DATA_ROOTS", str(tmp_path))


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
    from lanenb.contract.backends import register_backend, unregister_backend

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)

    def make(steps: list[dict], name: str = "script") -> dict:
        script = run_script(steps, tmp_path / f"{name}.jsonl")
        program = [sys.executable, str(HERE / "scripted_rank.py"), str(script)]
        register_backend("scripted", lambda **kw: LocalBackend(program=program, trainer_args=False, grace=2.0),
                         override=True)  # each call replays another script
        # a replay, not training: its ranks may outnumber the cores (a 4-rank scaling script on 2)
        return {"dataset": str(data), "processes": 2, "backend": "scripted", "local": {"oversubscribe": True}}

    yield make
    unregister_backend("scripted")


# the Kubernetes emulator fixtures (cluster, backend, kubeconfig) for notebook tests
sys.path.insert(0, str(HERE.parent / "k8s"))
from k8s_fixtures import backend, cluster, kubeconfig  # noqa: E402,F401
