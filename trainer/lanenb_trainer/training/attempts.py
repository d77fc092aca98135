"""How often a run was resumed and how many steps that cost, kept in its run directory.

A run that is preempted, or loses a rank, and is started again continues from its last
checkpoint; the steps it had taken since then are taken again. To say so ("resumed 2x, 14
steps lost"), rank 0 keeps two small files beside its checkpoints:

* ``checkpoints/progress``: the last global step it finished, overwritten in place after
  every step (one ``pwrite`` of 21 bytes: no fsync, nothing else per step). A killed rank set
  leaves it at the step it reached; a preempted one at the step it checkpointed.
* ``resumes.json``: one entry per resume (written atomically when the run continues) with the
  running count and total of steps lost, so every launch, in whatever log a view reads (the
  local ``job.log`` holds every attempt, a relaunched pod's log only the last), reports the
  totals in its ``resumed`` event.

A run that starts from step 0 removes ``resumes.json``: a reused run dir starts counting anew.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from lanenb_trainer.atomic import write_json

__all__ = ["ProgressMark", "reached_step", "record_resume", "forget_resumes", "PROGRESS_NAME", "RESUMES_NAME"]

PROGRESS_NAME = "progress"  # in run_dir/checkpoints/
RESUMES_NAME = "resumes.json"
_HISTORY = 100  # resumes kept in resumes.json (the count and total cover them all)
_WIDTH = 20  # digits of the progress mark: fixed, so a shorter number never leaves a longer one's tail


class ProgressMark:
    """Rank 0's ``checkpoints/progress``: the last global step finished."""

    def __init__(self, run_dir: Path) -> None:
        path = run_dir / "checkpoints" / PROGRESS_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)

    def mark(self, step: int) -> None:
        if self._fd is not None:
            os.pwrite(self._fd, b"%*d\n" % (_WIDTH, step), 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def reached_step(run_dir: Path) -> int | None:
    """The last step rank 0 finished, as ``checkpoints/progress`` says (None: no mark)."""
    try:
        return int((run_dir / "checkpoints" / PROGRESS_NAME).read_bytes().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _previous(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / RESUMES_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record_resume(run_dir: Path, *, step: int, epoch: int, preempted: bool, automatic: bool,
                  checkpoint: float | None = None, resized: dict[str, Any] | None = None,
                  reason: str | None = None) -> dict[str, Any]:
    """Rank 0, continuing from the checkpoint of global step ``step`` (written at time
    ``checkpoint``): count this resume, with the steps lost since that checkpoint (the progress
    mark minus ``step``), in ``resumes.json``; returns the ``resumed`` event's fields
    (docs/EVENTS.md). ``preempted``: the checkpoint was written for a preemption; a second
    resume from the same checkpoint follows another interruption (a rank killed before the
    next checkpoint), which is not called a preemption. ``resized``: the checkpoint was written by
    another number of ranks (``resize.ResizePlan.describe``: from, to, accumulation, lr_rule).
    ``reason``: why the checkpoint's stop happened (``stop_reason``: preempted, suspended,
    cancelled), carried as ``after`` so a user's suspend is not read back as a preemption."""
    before = _previous(run_dir)
    history = before.get("history") or []
    if checkpoint is not None and history and history[-1].get("checkpoint") == checkpoint:
        preempted = False
    reached = reached_step(run_dir)
    lost = max(0, reached - step) if reached is not None else 0
    count = int(before.get("count") or 0) + 1
    total = int(before.get("steps_lost") or 0) + lost
    entry = {"t": round(time.time(), 3), "step": step, "epoch": epoch, "reached": reached, "steps_lost": lost,
             "preempted": preempted, "automatic": automatic, "checkpoint": checkpoint, "resized": resized}
    history = [*history[-(_HISTORY - 1):], entry]
    write_json(run_dir / RESUMES_NAME, {"count": count, "steps_lost": total, "history": history})
    return {"count": count, "step": step, "epoch": epoch, "reached": reached, "steps_lost": lost,
            "steps_lost_total": total, "preempted": preempted, "automatic": automatic,
            "after": (reason or "preempted") if preempted else None,
            **({"resized": resized} if resized else {})}  # only on a resize


def forget_resumes(run_dir: Path) -> None:
    """A run starting from step 0: earlier runs' resumes are not its own."""
    (run_dir / RESUMES_NAME).unlink(missing_ok=True)
