"""The MPIJob worker container's first process: pass the pod's SIGTERM on to its ranks as a preemption.

``python -m lanenb_trainer.worker_init [--grace S] -- /usr/sbin/sshd -De`` is the worker container's
command (``lanenb.backends.kubernetes.manifests``). Without it sshd is PID 1: when the pod is deleted
with grace (scheduler preemption, ``runPolicy.suspend``, a drain) the runtime SIGTERMs sshd, sshd exits
at once, and the kernel SIGKILLs every process left in the PID namespace: that worker's ranks die
before any checkpoint, and the run loses the steps since the last one, as on a lost node.

This init runs the command as its child and, like ``tini``, stands in for PID 1 (it reaps orphans and,
when it is not PID 1, makes itself their subreaper):

- **SIGTERM** (the pod is being stopped): SIGUSR1 to each rank process in the container, the signal
  the ranks take as a preemption (``lanenb_trainer.training.preempt``; mpirun relays the launcher's
  the same way); the ranks agree at the next step boundary, checkpoint and exit 75. Once they have
  exited, or ``--grace`` seconds passed (a little under the pod's ``terminationGracePeriodSeconds``,
  after which the kubelet SIGKILLs everything anyway), the child gets SIGTERM and this process exits
  with its status. A second SIGTERM stops the waiting.
- any other signal it can catch (SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH) goes to the child.
- the child ending on its own ends this process, with the child's status (``128+N`` for signal N).

A rank is a process below this one (in the container: every process) whose command line runs the
trainer package as a module (``python -m lanenb_trainer ...``, ``TRAINER_ENTRYPOINT``), never sshd
nor orted, and only the outermost of such a process tree (a DataLoader worker forked by a rank has
its rank's command line: mpirun, too, signals only the processes it started). Limiting the search to
this process's descendants changes nothing in a container and keeps a test on a shared machine
from signalling anyone else's ranks.

stdlib only: it runs in every worker pod, before and beside the ranks.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import os
import signal
import sys
import time
from collections.abc import Iterable, Sequence

__all__ = ["DEFAULT_GRACE", "RANK_MODULE", "is_rank_cmdline", "rank_pids", "main"]

DEFAULT_GRACE = 50.0  # the default terminationGracePeriodSeconds is 60: room for sshd's exit and ours
RANK_MODULE = "lanenb_trainer"  # what the ranks run: python -m lanenb_trainer (manifests.TRAINER_ENTRYPOINT)
PREEMPT_SIGNAL = signal.SIGUSR1  # what a rank takes as "checkpoint and stop" (preempt.SIGNALS)
# Signals passed on to the child as they are; SIGTERM is the preemption, SIGCHLD says a child ended.
FORWARDED = frozenset({signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                       signal.SIGWINCH})
HANDLED = FORWARDED | {signal.SIGTERM, signal.SIGCHLD}
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_POLL_S = 0.1


def is_rank_cmdline(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a Python interpreter running the trainer as a module (``-m lanenb_trainer``,
    also ``-mlanenb_trainer``), not one of its helper modules (``lanenb_trainer.launcher``, this init)
    and never another program (sshd, orted, a shell) that merely names it."""
    if not argv or not os.path.basename(argv[0]).startswith("python"):
        return False
    words = iter(argv[1:])
    for word in words:
        if word == "-m":
            return next(words, None) == RANK_MODULE
        if word.startswith("-m"):
            return word[2:] == RANK_MODULE
        if word in ("-W", "-X"):  # options that take the next word
            next(words, None)
        elif word.startswith("-c") or not word.startswith("-"):
            return False  # the interpreter's options end here: -c code, a script
    return False


def _proc_table() -> dict[int, tuple[int, list[str], str]]:
    """``pid -> (ppid, argv, state)`` for every process /proc shows (gone ones skipped)."""
    table: dict[int, tuple[int, list[str], str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = [a.decode(errors="replace") for a in fh.read().split(b"\0")[:-1]]
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid ...
        table[int(name)] = (int(fields[1]), argv, fields[0])
    return table


def rank_pids(root: int | None = None) -> list[int]:
    """The rank processes below ``root`` (default: this process), outermost only, zombies left out."""
    root = os.getpid() if root is None else root
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _argv, _state) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        _ppid, argv, state = table[pid]
        if is_rank_cmdline(argv):
            if state != "Z":
                found.append(pid)
            continue  # what a rank forked (DataLoader workers) is the rank's to stop
        stack.extend(children.get(pid, []))
    return sorted(found)


def _alive(pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` that still run (a zombie has exited: its parent has not reaped it yet)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        if stat[stat.rindex(")") + 2:].split()[0] != "Z":
            out.append(pid)
    return out


def _become_subreaper() -> None:
    """Orphans (a daemonized orted, a rank whose parent died) are reparented to us, so ``rank_pids``
    finds them and we reap them. PID 1 gets them anyway; best effort elsewhere (Linux only)."""
    if os.getpid() == 1 or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class _Init:
    """The child, its exit status once reaped, and the signal loop."""

    def __init__(self, command: Sequence[str], grace: float, say) -> None:
        self.grace = grace
        self.say = say
        self.status: int | None = None
        self.child = os.posix_spawnp(command[0], list(command), os.environ, setsigmask=(),
                                     setsigdef=tuple(HANDLED))

    def reap(self) -> None:
        """Collect every exited child (ours and orphans): PID 1 must, or zombies pile up."""
        while True:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.child:
                self.status = os.waitstatus_to_exitcode(wstatus)

    def send(self, signum: int) -> None:
        if self.status is None:
            try:
                os.kill(self.child, signum)
            except ProcessLookupError:
                pass

    def next_signal(self, timeout: float) -> int | None:
        info = signal.sigtimedwait(HANDLED, timeout)
        self.reap()
        return None if info is None else info.si_signo

    def preempt(self) -> None:
        """SIGUSR1 to the ranks, then wait (bounded) for them to exit; other signals still go to the child."""
        ranks = rank_pids()
        for pid in ranks:
            try:
                os.kill(pid, PREEMPT_SIGNAL)
            except ProcessLookupError:
                pass
        if ranks:
            self.say(f"lanenb worker init: SIGTERM: asked rank process(es) {', '.join(map(str, ranks))} to "
                     f"checkpoint and stop (up to {self.grace:g}s)")
        deadline = time.monotonic() + self.grace
        while ranks and (left := deadline - time.monotonic()) > 0:
            signum = self.next_signal(min(_POLL_S, left))
            if signum == signal.SIGTERM:
                self.say("lanenb worker init: second SIGTERM: not waiting for the ranks any longer")
                return
            if signum in FORWARDED:
                self.send(signum)
            ranks = _alive(ranks)
        if ranks:
            self.say(f"lanenb worker init: rank process(es) {', '.join(map(str, ranks))} still running after "
                     f"{self.grace:g}s; stopping anyway")

    def run(self) -> int:
        preempted = False
        while self.status is None:
            signum = self.next_signal(1.0)
            if self.status is not None:
                break
            if signum == signal.SIGTERM and not preempted:
                preempted = True
                self.preempt()
                self.send(signal.SIGTERM)
            elif signum == signal.SIGTERM or signum in FORWARDED:
                self.send(signum)
        return self.status if self.status >= 0 else 128 - self.status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lanenb_trainer.worker_init",
                                     description="Run a worker container's command; on SIGTERM let its ranks "
                                                 "checkpoint first.")
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE,
                        help=f"seconds to wait for the ranks after a SIGTERM before stopping the command "
                             f"(default {DEFAULT_GRACE:g}: under the pod's terminationGracePeriodSeconds)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command, e.g. /usr/sbin/sshd -De")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --, e.g. -- /usr/sbin/sshd -De")
    if args.grace < 0:
        parser.error(f"--grace {args.grace:g}: give seconds >= 0")
    # Blocked before the child exists, so none is lost; the child starts with an empty mask and the
    # default dispositions (posix_spawn's setsigmask/setsigdef), as if we were not here.
    signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    _become_subreaper()
    try:
        init = _Init(command, args.grace, say=lambda m: print(m, file=sys.stderr, flush=True))
    except OSError as exc:
        print(f"lanenb worker init: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return 127 if exc.errno in (errno.ENOENT, None) else 126
    return init.run()


if __name__ == "__main__":
    sys.exit(main())
