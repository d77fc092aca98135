"""A stop, told both ways between the local launcher and the ranks.

Why a SIGTERM reached the ranks: a preemption, the user's suspend, or the user's cancel.

To a rank every stop is the same signal (``training/preempt.py``: checkpoint at the next step
boundary, then leave). Who sent it is known only to the launcher, which writes its reason into the
run directory *before* it signals: ``cancel.json`` (``Job.cancel``) or ``suspend.json``
(``Job.suspend``). Rank 0 reads it once the ranks have agreed to stop, so the events say what
happened ("cancelled", "suspended") instead of calling every stop a preemption. Without a file
(Kubernetes evicting a pod, a spot VM going away) the stop is a preemption.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CANCEL_NAME", "SUSPEND_NAME", "PREEMPTED", "SUSPENDED", "CANCELLED", "PID_DIR_ENV",
           "RESUMED_BY_ENV", "stop_reason", "say_stopped", "has_stopped"]

CANCEL_NAME = "cancel.json"  # written by the launcher's cancel before it signals the ranks
SUSPEND_NAME = "suspend.json"  # written by the launcher's suspend before it signals: the stop is a pause
PREEMPTED, SUSPENDED, CANCELLED = "preempted", "suspended", "cancelled"
RESUMED_BY_ENV = "LANENB_RESUMED_BY"  # "user": a person's resume started this launch, not a launcher's retry
PID_DIR_ENV = "LANENB_PID_DIR"  # the local launcher's folder for its ranks' pid files (lanenb.launch.rankguard)


def stop_reason(run_dir: str | os.PathLike[str]) -> str:
    """``cancelled``, ``suspended`` or ``preempted`` (no word from the launcher)."""
    run = Path(run_dir)
    if (run / CANCEL_NAME).exists():
        return CANCELLED
    if (run / SUSPEND_NAME).exists():
        return SUSPENDED
    return PREEMPTED


def _marker(pid_dir: str | os.PathLike[str], pid: int) -> Path:
    return Path(pid_dir) / f"stopped-{pid}"


def say_stopped() -> None:
    """This rank's checkpoint and last event are written: what is left is leaving (the barrier,
    MPI finalize). A no-op outside the local launcher; never raises (the stop goes on)."""
    folder = os.environ.get(PID_DIR_ENV)
    if not folder:
        return
    try:
        _marker(folder, os.getpid()).touch()
    except OSError:
        pass


def has_stopped(pid_dir: str | os.PathLike[str], pid: int) -> bool:
    """Whether rank process ``pid`` said it is done (``say_stopped``)."""
    return _marker(pid_dir, pid).exists()
