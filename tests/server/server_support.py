"""Helpers of the server tests: real jobs run by the ``scripted`` backend (the real supervisor
and mpirun replaying ``tests/notebook/scripted_rank.py``), and JSON requests."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

NOTEBOOK_TESTS = Path(__file__).resolve().parent.parent / "notebook"
if str(NOTEBOOK_TESTS) not in sys.path:
    sys.path.insert(0, str(NOTEBOOK_TESTS))

from notebook_support import run_script, training_script  # noqa: E402

__all__ = ["register_scripted", "launch", "body_of", "training_script"]


def register_scripted(tmp_path: Path, steps: list[dict], name: str = "script") -> str:
    """Register backend ``scripted`` replaying ``steps``; returns the dataset dir to pass."""
    from lanenb.backends.local.backend import LocalBackend
    from lanenb.contract.backends import register_backend

    script = run_script(steps, tmp_path / f"{name}.jsonl")
    program = [sys.executable, str(NOTEBOOK_TESTS / "scripted_rank.py"), str(script)]
    register_backend("scripted", lambda **kw: LocalBackend(program=program, trainer_args=False, grace=2.0),
                     override=True)  # a test may replay several scripts
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    return str(data)


def launch(tmp_path: Path, name: str, steps: list[dict], wait: bool = True) -> Any:
    from lanenb.jobs import TrainSpec, submit

    data = register_scripted(tmp_path, steps, name)
    job = submit(TrainSpec(dataset=data, processes=2, backend="scripted", name=name))
    if wait:
        job.wait(timeout=120)
    return job


def body_of(response: Any) -> Any:
    return json.loads(response.body.decode())
