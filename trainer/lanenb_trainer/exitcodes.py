"""The exit statuses of ``python -m lanenb_trainer``, named once for the trainer and its launchers.

A launcher decides from a rank's (or mpirun's) exit status whether to start the ranks again:
the local supervisor restarts after :data:`PREEMPTED` or a rank killed by a signal (up to
``--max-restarts``), never after :data:`FAILED` or :data:`CONFIG` (a bug or a bad flag fails
again); the MPIJob launcher passes :data:`PREEMPTED` on, so the launcher Job's retry resumes.
No torch here: the supervisor imports it and must start in milliseconds.
"""

from __future__ import annotations

__all__ = ["OK", "FAILED", "CONFIG", "PREEMPTED", "CANCELLED", "killed_by_signal", "restartable"]

OK = 0
FAILED = 1  # an exception ended a rank (its ``error`` event says which)
CONFIG = 2  # an invalid flag or variable, before any rank did work
# A SIGTERM made every rank checkpoint at a step boundary and stop: the run can go on from
# there. sysexits.h's EX_TEMPFAIL ("temporary failure; the user is invited to retry"), not
# 143 (128 + SIGTERM): a rank that died of the signal itself exits 143 and wrote nothing.
# mpirun passes it on as its own status when the ranks were signalled directly.
PREEMPTED = 75
CANCELLED = 130  # SIGINT (Ctrl-C): stop now, no checkpoint


def killed_by_signal(code: int) -> bool:
    """A launcher status that says a process died of a signal: mpirun's ``128 + N`` for a rank
    (``kill -9``, the OOM killer) or Popen's ``-N`` for mpirun itself."""
    return code < 0 or 128 < code < 160


def restartable(code: int) -> bool:
    """Whether starting the ranks again can help: a preemption checkpointed, and a kill lost at
    most the steps since the last checkpoint; an error or a bad config would only repeat, and
    Ctrl-C (:data:`CANCELLED`, or mpirun's ``-2``) is a person stopping the run."""
    return code == PREEMPTED or (killed_by_signal(code) and code not in (CANCELLED, -2))
