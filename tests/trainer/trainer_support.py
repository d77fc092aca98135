"""Shared fixtures: one tiny synthetic TuSimple root per session, and 2-rank run helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lanenb.launch.lines import LogLine
from lanenb.launch.mpirun import launch_env, run_local
from lanenb_trainer.config import TrainConfig

TINY = dict(img_height=64, img_width=160, batch_size=4, val_batch_size=8, log_every=1,
            system_interval=0.5, warmup_steps=2)


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory) -> Path:
    from lanenb_trainer.data.synth import synthesize

    root = tmp_path_factory.mktemp("synth") / "tusimple"
    synthesize(root, 48, seed=3, width=320, height=180, test_fraction=0.25, progress=False)
    return root


def train_args(data: Path, run_dir: Path, **overrides: Any) -> list[str]:
    cfg = TrainConfig(data=str(data), run_dir=str(run_dir), **{**TINY, **overrides})
    return cfg.validate().to_argv()


def run_ranks(processes: int, args: list[str], *, extra_env: dict[str, str] | None = None,
              ) -> tuple[int, list[LogLine]]:
    lines: list[LogLine] = []
    env = launch_env(extra={"LANENB_THREADS": "1", **(extra_env or {})})
    for var in ("LANENB_FAULT_RANK", "LANENB_FAULT_STEP"):
        if var not in (extra_env or {}):
            env.pop(var, None)
    code = run_local(processes, args, env=env, on_line=lines.append, grace=5)
    return code, lines


def events_of(lines: list[LogLine], kind: str, rank: int | None = None):
    return [ln.event for ln in lines
            if ln.event is not None and ln.event.kind == kind and (rank is None or ln.event.rank == rank)]


def dump(lines: list[LogLine]) -> str:
    return "\n".join(ln.tagged() for ln in lines)[-6000:]


def engines() -> list:
    from lanenb_trainer.engines import horovod_available

    return [
        pytest.param("ddp", id="ddp"),
        pytest.param("horovod", id="horovod", marks=[
            pytest.mark.horovod,
            pytest.mark.skipif(not horovod_available(), reason="horovod.torch not importable "
                               "(build it with scripts/install_horovod.sh)")]),
    ]


