"""Fixtures for the notebook layer: an isolated LANENB_HOME, an IPython shell with the extension
loaded, and a ``scripted`` job backend that runs ``scripted_rank.py`` under the real mpirun."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def lanenb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    monkeypatch.setenv("LANENB_DATA_ROOTS", str(tmp_path))
    return home


@pytest.fixture(scope="session")
def ip():
    """The IPython shell with ``%load_ext lanenb`` done (what a notebook user types first)."""
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "lanenb")
    return shell


def run_script(steps: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in steps))
    return path


def training_script(steps: int = 6, world: int = 2, epochs: int = 2, sleep: float = 0.05,
                    fail_rank: int | None = None, scale: float = 1.0) -> list[dict]:
    """Events shaped like the trainer's (docs/EVENTS.md) for ``world`` ranks."""
    out: list[dict] = []
    per_epoch = max(1, steps // epochs)
    for r in range(world):
        out.append({"rank": r, "event": {"kind": "start", "world_size": world, "engine": "ddp", "device": "cpu",
                                         "config": {"batch_size": 4, "epochs": epochs, "backbone": "small"},
                                         "total_steps": steps, "steps_per_epoch": per_epoch, "train_frames": 40}})
        out.append({"rank": r, "line": f"plain output of rank {r}"})
    for s in range(1, steps + 1):
        out.append({"rank": 0, "sleep": sleep, "event": {"kind": "step", "epoch": (s - 1) // per_epoch, "step": s,
                                                         "total_steps": steps, "loss": scale * (2.0 / s),
                                                         "lr": 0.01, "images_per_s": 100.0 * scale}})
        for r in range(world):
            out.append({"rank": r, "event": {"kind": "system", "cpu_percent": 50.0 + r, "rss_mb": 300.0 + r}})
        if s % per_epoch == 0:
            e = s // per_epoch - 1
            out.append({"rank": 0, "event": {"kind": "epoch", "epoch": e, "epochs": epochs, "step": s,
                                             "train_loss": 1.0 / (e + 1), "val_accuracy": 0.5 + 0.2 * e,
                                             "val_fp": 0.1, "val_fn": 0.2}})
    if fail_rank is not None:
        out.append({"rank": fail_rank, "event": {"kind": "error", "type": "RuntimeError", "message": "loss is NaN"}})
        out.append({"rank": fail_rank, "line": "Traceback (most recent call last):"})
        out.append({"rank": fail_rank, "exit": 3})
        return out
    out.append({"rank": 0, "event": {"kind": "eval", "split": "test", "accuracy": 0.91 * scale, "fp": 0.05,
                                     "fn": 0.04, "frames": 12}})
    for r in range(world):
        out.append({"rank": r, "event": {"kind": "end", "status": "completed", "step": steps, "duration_s": 1.0}})
    return out


@pytest.fixture
def scripted(tmp_path: Path):
    """``scripted(steps)`` registers backend ``scripted`` replaying ``steps`` and returns a spec dict."""
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    from lanenb.jobs.backends import _REGISTRY, register_backend
    from lanenb.jobs.backends.local import LocalBackend

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)

    def make(steps: list[dict], name: str = "script") -> dict:
        script = run_script(steps, tmp_path / f"{name}.jsonl")
        program = [sys.executable, str(HERE / "scripted_rank.py"), str(script)]
        register_backend("scripted", lambda **kw: LocalBackend(program=program, trainer_args=False, grace=2.0))
        return {"dataset": str(data), "processes": 2, "backend": "scripted"}

    yield make
    _REGISTRY.pop("scripted", None)


# the Kubernetes emulator fixtures (cluster, backend, kubeconfig) for notebook tests
sys.path.insert(0, str(HERE.parent / "k8s"))
from k8s_fixtures import backend, cluster, kubeconfig  # noqa: E402,F401
