"""The toy Slurm backend's implementation (a real plug-in would import its client here)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lanenb.contract.backend import Backend, LogLine
from lanenb.contract.status import JobState, JobStatus


class SlurmBackend(Backend):
    """Renders the ``sbatch`` script; never submits (the tests only dry-run it)."""

    name = "slurm"

    def render(self, spec: Any) -> str:
        opts = spec.options("slurm")
        lines = ["#!/bin/bash", f"#SBATCH --job-name={spec.name}", f"#SBATCH --partition={opts.partition}",
                 f"#SBATCH --ntasks={spec.processes}"]
        if opts.account:
            lines.append(f"#SBATCH --account={opts.account}")
        lines.append("srun python -m lanenb_trainer " + shlex.join(spec.trainer_args()))
        return "\n".join(lines)

    def submit(self, spec: Any, run_dir: str | Path | None) -> dict[str, Any]:
        raise NotImplementedError("the toy Slurm backend only renders its script (--dry-run)")

    def status(self, spec: Any, handle: dict[str, Any]) -> JobStatus:
        return JobStatus(JobState.PENDING)

    def logs(self, spec: Any, handle: dict[str, Any], *, follow: bool = False,
             worker: int | None = None) -> Iterator[LogLine]:
        return iter(())

    def cancel(self, spec: Any, handle: dict[str, Any]) -> None:
        return None

    def describe(self, spec: Any, handle: dict[str, Any]) -> dict[str, Any]:
        return {"backend": "slurm"}
