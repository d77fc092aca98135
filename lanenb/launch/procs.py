"""Stopping processes: the one TERM-then-KILL sequence every stop path uses.

The supervisor's cancel and its orphan reaping, the kernel's stop of a job whose supervisor is
gone and ``lanenb train``'s Ctrl-C all stop ranks the same way (docs/architecture/backends-jobs.md, "Local
jobs"): exactly one signal each (a second one makes a rank or Open MPI give up at once, cutting
off a rank that is still writing its checkpoint and its ``end(status=cancelled)`` event), a
grace period, then SIGKILL for what is left. A zombie counts as stopped: a rank whose parent
(a held mpirun) cannot reap it yet has nothing left to do.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable

import psutil

__all__ = ["KILL_WAIT", "kill", "reaped", "send_signal", "terminate", "wait_gone"]

KILL_WAIT = 5.0  # seconds to wait for SIGKILLed processes to be gone
_POLL = 0.05


def send_signal(pid: int, sig: int, *, group: bool = False) -> None:
    """``os.kill`` (``os.killpg`` with ``group``), quiet when the process is gone or not ours."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def _signal_each(procs: Iterable[psutil.Process], sig: int) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):  # gone, or its pid now belongs to another process
            proc.send_signal(sig)


def reaped(proc: psutil.Process) -> bool:
    """Whether ``proc`` has stopped (a zombie of ours is reaped here): nothing left to signal."""
    try:
        if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
            return False
    except psutil.Error:
        return True
    # our own child: reap it, so no zombie is left behind; someone else's (mpirun's rank): its parent reaps it
    with contextlib.suppress(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)
    return True


def wait_gone(procs: Iterable[psutil.Process], seconds: float, *,
              until: Callable[[list[psutil.Process]], bool] | None = None) -> list[psutil.Process]:
    """Wait up to ``seconds`` for ``procs`` to stop (or for ``until(still running)`` to be true);
    returns those still running."""
    left = list(procs)
    deadline = time.monotonic() + seconds
    while True:
        left = [p for p in left if not reaped(p)]
        if not left or time.monotonic() >= deadline or (until is not None and until(left)):
            return left
        time.sleep(_POLL)


def kill(procs: Iterable[psutil.Process], *, group: int | None = None) -> list[psutil.Process]:
    """SIGKILL process group ``group`` (if given) and each of ``procs``; returns those still
    running ``KILL_WAIT`` seconds later."""
    procs = list(procs)
    if group:
        send_signal(int(group), signal.SIGKILL, group=True)
    _signal_each(procs, signal.SIGKILL)
    return wait_gone(procs, KILL_WAIT)


def terminate(procs: Iterable[psutil.Process], grace: float, *, sig: int = signal.SIGTERM,
              group: int | None = None,
              on_kill: Callable[[list[psutil.Process]], None] | None = None,
              ready: Callable[[list[psutil.Process]], bool] | None = None,
              on_ready: Callable[[], None] | None = None) -> list[psutil.Process]:
    """Exactly one ``sig`` to each of ``procs``, ``grace`` seconds to stop, then SIGKILL for the
    ones still running (and for process group ``group``, if given).

    Args:
        procs: the processes (``psutil.Process``, so a reused pid is never signalled).
        grace: seconds they get after ``sig``.
        sig: the one polite signal (the trainer turns SIGTERM into ``end(status=cancelled)``).
        group: a process group that gets SIGKILL too when anything had to be killed.
        on_kill: called with the survivors just before they get SIGKILL (to log it).
        ready: ``ready(still running)``: they have done their part and are only leaving (a rank
            that wrote its checkpoint and last event); then ``on_ready`` is called once and the
            wait goes on to the end of ``grace``.
        on_ready: what to do then (let a held mpirun go on, so the ranks can finalize).

    Returns:
        The processes that had to be killed.
    """
    procs = list(procs)
    _signal_each(procs, sig)
    deadline = time.monotonic() + grace
    alive = procs
    if ready is not None and on_ready is not None:
        alive = wait_gone(procs, grace, until=ready)
        if alive and ready(alive):
            on_ready()
    alive = wait_gone(alive, max(0.0, deadline - time.monotonic()))
    if alive:
        if on_kill is not None:
            on_kill(alive)
        kill(alive, group=group)
    return alive
