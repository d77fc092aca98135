"""Rank guard: ``python rankguard.py PROGRAM ARGS...`` makes the rank die with its launcher.

mpirun starts each local rank in a process group of its own, so when mpirun is killed
(SIGKILL, the OOM killer, its supervisor gone) the ranks are re-parented and keep running
(and keep their GPU) until they next write output. This guard, put in front of the rank's
argv by the local backend, asks Linux to SIGKILL the rank when its parent (mpirun) dies
(``PR_SET_PDEATHSIG``, kept across ``exec``), records the rank's pid in
``$LANENB_PID_DIR/rank-<R>.json`` so ``cancel()`` can find it whatever else happened, and then
``exec``s the real program: same pid, no extra process.

Run by path, not ``-m``: it imports only the standard library, so it adds a few
milliseconds per rank. On systems without ``prctl`` it only records the pid.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

PID_DIR_ENV = "LANENB_PID_DIR"
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):  # not Linux
        return
    if os.getppid() != parent or parent == 1:  # the launcher died before prctl took effect
        os._exit(137)


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot): with the pid, it
    tells this process from a later one that reused the pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        return int(stat.rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _record_pid() -> None:
    folder = os.environ.get(PID_DIR_ENV)
    if not folder:
        return
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "x")
    path = os.path.join(folder, f"rank-{rank}.json")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as fh:
            json.dump({"pid": os.getpid(), "rank": rank, "start_ticks": _start_ticks(os.getpid())}, fh)
        os.replace(tmp, path)
    except OSError:  # a full disk must not keep the rank from running
        try:
            os.unlink(tmp)
        except OSError:
            pass


def main(argv: list[str]) -> None:
    if not argv:
        sys.stderr.write("usage: rankguard.py PROGRAM [ARGS...]\n")
        sys.exit(2)
    _die_with_parent()
    _record_pid()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
