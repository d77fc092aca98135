"""The detached process that owns one local job.

The notebook kernel starts ``python -m lanenb.backends.local.supervise`` in its own session
(``start_new_session=True``), so restarting the kernel does not kill training. The supervisor
runs the launcher (mpirun) as its child, appends every output line to ``job.log`` in the run
dir (whole lines, re-tagged as mpirun tags them, ``lanenb_trainer.ranktag``, so any process can
re-attach and tell the ranks apart) and finally writes ``exit.json`` atomically; that file, not
the supervisor's liveness, is what says the job is over and how it ended. It never parses an
``@lanenb`` event: the log cap only looks for the marker; the readers parse.

The process tree and how it comes down (docs/ARCHITECTURE.md, "Local jobs"):

* **Crash.** The supervisor is a child subreaper, so ranks orphaned by a dead mpirun are
  re-parented to it and stopped before ``exit.json`` is written; mpirun gets SIGKILL when
  the supervisor dies (``PR_SET_PDEATHSIG``) and each rank when mpirun dies (the rank guard,
  ``lanenb.launch.rankguard``). Killing any one of them takes the ranks down.
* **Cancel.** One SIGTERM to the supervisor. It holds mpirun (SIGSTOP), sends one SIGTERM
  to each rank, SIGKILLs the ranks still running after ``--grace`` seconds and lets mpirun
  go on (``lanenb.launch.mpirun.stop_ranks``): Open MPI would kill every rank one second
  after the first one exits, or at once on a second signal, cutting off a rank that is
  still writing its last checkpoint and its ``end(status=cancelled)`` event. mpirun gets
  SIGKILL if it outlives its ranks by another grace period. Orphans get the same sequence
  (``lanenb.launch.procs.terminate``).
* **Full disk.** SIGXFSZ is ignored and write errors on ``job.log`` stop the log, not the
  supervisor: it keeps draining mpirun, and ``exit.json`` (written into space freed from a
  file reserved at start if need be) says what happened. ``job.log`` is capped: past
  ``--max-log-bytes`` only ``@lanenb`` event lines are kept, past twice that only the events
  the reducer cannot do without (``DIGEST_KINDS``: start, epoch, eval, checkpoint, end, error,
  snapshot: a few per epoch).
* **Preemption and killed ranks.** With ``--max-restarts N`` the supervisor starts mpirun
  again, up to N times, when it ends with a preemption (exit 75: a SIGTERM made every rank
  checkpoint at a step boundary, ``lanenb_trainer.exitcodes``) or a rank killed by a signal,
  never after an error or a cancel. The ranks get the same argv, ``--run-id`` included, so
  each start continues from the run's last checkpoint (and says so in a ``resumed`` event).
  Each restart is a supervisor line in ``job.log`` and an entry of ``restarts`` in ``exit.json``.
* **Long runs.** Beside ``job.log`` the supervisor keeps ``job.digest``: every ``DIGEST_KINDS``
  event and a thinned, evenly spread sample of ``step`` events (``DIGEST_STEPS`` per doubling
  of the run: ~5k lines for 1M steps), each with the ``job.log`` byte offset after it. A reader
  far behind (a new kernel re-attaching to a 10 GB log) folds the digest and the log's tail
  instead of every line (``logfile.read_chunk``).

It never imports torch: it must start in milliseconds.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import functools
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import psutil

from lanenb.launch import procs
from lanenb.launch.lines import iter_output
from lanenb.launch.mpirun import free_port, stop_ranks
from lanenb_trainer import exitcodes
from lanenb_trainer.atomic import write_json
from lanenb_trainer.events import PREFIX as EVENT_PREFIX
from lanenb_trainer.ranktag import tag_line
from lanenb_trainer.stopping import PID_DIR_ENV, RESUMED_BY_ENV, has_stopped

LOG_NAME = "job.log"
DIGEST_NAME = "job.digest"  # "<job.log offset after the line> <line>": what a late reader folds
# events a run's summary needs whatever the log's length: outcome, figures, checkpoints, errors
DIGEST_KINDS = frozenset({"start", "epoch", "eval", "checkpoint", "end", "error", "snapshot"})
DIGEST_STEPS = 512  # step events kept per stride; the stride doubles after each 512
_KIND = re.compile(r'"kind":\s*"(\w+)"')
EXIT_NAME = "exit.json"
# cancel.json / suspend.json: written by LocalBackend.cancel / suspend before their stop; the
# ranks read them to say why they stopped (lanenb_trainer.stopping)
PIDS_NAME = "pids"  # folder: rank-<R>.json written by each rank's guard
RESERVE_NAME = ".exit.reserve"  # space set aside at start so exit.json fits on a full disk
SUPERVISOR_PREFIX = "[lanenb-supervisor] "
DEFAULT_MAX_LOG_BYTES = 1 << 30
DEFAULT_GRACE = 10.0

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    """Linux ``prctl``; False where it is missing (the guards are then best effort)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class JobLog:
    """``job.log`` with a size cap that never raises: the job matters more than its log.

    Up to ``max_bytes`` every line is kept; then only ``@lanenb`` event lines (progress and
    the final events), until ``2 * max_bytes``; then none. A write error (disk full, file
    too large) stops writing for good and is reported in ``exit.json``.
    """

    def __init__(self, fh: IO[bytes], max_bytes: int, digest: IO[bytes] | None = None) -> None:
        self.fh = fh  # unbuffered: nothing is left in a buffer to fail again at close
        self.max_bytes = max_bytes
        self.size = fh.tell()
        self.dropped = 0
        self.error: str | None = None
        self.digest = digest
        self.steps_seen = 0
        self._stride = 1
        self._kept_at_stride = 0
        self._said_cap = False
        self._lock = threading.Lock()  # the escalation thread writes too

    def write(self, text: str, *, keep: bool = False) -> None:
        """Append ``text`` (whole lines); ``keep`` marks the supervisor's own few lines,
        which may pass the cap so the log always says how it ended."""
        with self._lock:
            self._write(text, keep)

    def _write(self, text: str, keep: bool) -> None:
        if self.error is not None:
            self.dropped += 1
            return
        kind = None
        if EVENT_PREFIX in text:
            found = _KIND.search(text)
            kind = found.group(1) if found else None
        if not keep and self.size >= self.max_bytes:
            hard = self.size >= 2 * self.max_bytes
            if kind is None or (hard and kind not in DIGEST_KINDS):
                self.dropped += 1
                if not self._said_cap:
                    self._said_cap = True
                    self._write(f"{SUPERVISOR_PREFIX}job.log reached {self.max_bytes} bytes: from here on only "
                                f"@lanenb event lines are kept (past {2 * self.max_bytes} bytes only "
                                f"{', '.join(sorted(DIGEST_KINDS))})\n", True)
                return
        data = text.encode("utf-8", errors="replace")
        try:
            view = memoryview(data)
            while view:  # an unbuffered write may be partial
                written = self.fh.write(view)
                if not written:
                    raise OSError(errno.EIO, "the file took no more bytes")
                view = view[written:]
        except OSError as exc:  # ENOSPC, EFBIG, EIO: keep the job, lose the log
            self.error = f"writing {getattr(self.fh, 'name', LOG_NAME)} failed after {self.size} bytes: {exc}"
            self.dropped += 1
            return
        self.size += len(data)
        if self.digest is not None and kind is not None and self._digested(kind):
            try:
                self.digest.write(b"%d %s" % (self.size, data))
            except OSError:  # the digest is a convenience: a full disk stops it, not the job
                self.digest = None

    def _digested(self, kind: str) -> bool:
        """Whether an event of ``kind`` goes to the digest: every ``DIGEST_KINDS`` one, and
        every ``stride``-th step, the stride doubling after ``DIGEST_STEPS`` kept (an even
        sample of any length of run in O(DIGEST_STEPS * log(steps)) lines)."""
        if kind in DIGEST_KINDS:
            return True
        if kind != "step":
            return False
        self.steps_seen += 1
        if self.steps_seen % self._stride:
            return False
        self._kept_at_stride += 1
        if self._kept_at_stride >= DIGEST_STEPS:
            self._stride *= 2
            self._kept_at_stride = 0
        return True

    def say(self, text: str) -> None:
        self.write(SUPERVISOR_PREFIX + text + "\n", keep=True)


class Stopper:
    """Cancel and crash handling: who gets which signal, when (see the module docstring)."""

    def __init__(self, log: JobLog, grace: float, pid_dir: Path | None = None) -> None:
        self.log = log
        self.grace = grace
        self.pid_dir = pid_dir  # where the ranks say they are done (lanenb_trainer.stopping)
        self.child: subprocess.Popen[bytes] | None = None
        self.signals: list[int] = []
        self._lock = threading.Lock()

    def ranks(self) -> list[psutil.Process]:
        """mpirun's direct children (the ranks; never their DataLoader workers, which the
        rank stops itself) and anything orphaned to us (we are its subreaper)."""
        found: list[psutil.Process] = []
        try:
            me = psutil.Process()
            for proc in me.children():
                if self.child is not None and proc.pid == self.child.pid:
                    found += proc.children()
                else:
                    found.append(proc)
        except psutil.Error:
            pass
        return found

    def on_signal(self, signum: int, _frame: Any) -> None:
        with self._lock:
            self.signals.append(signum)
            first = len(self.signals) == 1
        if not first or self.child is None:
            return  # one signal is enough: never a second one to mpirun or the ranks
        threading.Thread(target=self._stop, args=(signum,), daemon=True, name="lanenb-stop").start()

    def _stop(self, signum: int) -> None:
        assert self.child is not None
        ranks = self.ranks()
        self.log.say(f"signal {signum}: stopping {len(ranks)} rank(s) (SIGTERM, SIGKILL after {self.grace:g} s)")
        pid_dir = self.pid_dir
        stop_ranks(self.child.pid, ranks, self.grace, say=self.log.say,
                   ready=None if pid_dir is None else (lambda rank: has_stopped(pid_dir, rank.pid)))
        if self._wait_child(self.grace + 5):
            return
        self.log.say("mpirun did not exit after its ranks: SIGKILL")
        try:
            self.child.kill()
        except ProcessLookupError:
            pass

    def _wait_child(self, seconds: float) -> bool:
        assert self.child is not None
        try:
            self.child.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def reap_orphans(self) -> int:
        """After mpirun exited: stop whatever of the job is still around (orphaned ranks)."""
        # a rank that exited after mpirun is our zombie (we are the subreaper): reaped, not stopped
        left = [p for p in self.ranks() if not procs.reaped(p)]
        if not left:
            return 0
        self.log.say(f"{len(left)} process(es) outlived mpirun ({', '.join(_describe(p) for p in left)}): "
                     f"SIGTERM, SIGKILL after {min(self.grace, 5.0):g} s")
        procs.terminate(left, min(self.grace, 5.0))
        return len(left)


def _describe(proc: psutil.Process) -> str:
    """``pid 123 python3 -m lanenb_trainer``: which process, for the log."""
    try:
        return f"pid {proc.pid} " + " ".join(proc.cmdline()[:3])[:80]
    except psutil.Error:
        return f"pid {proc.pid}"


def _die_with_supervisor(supervisor: int) -> None:
    """preexec_fn of mpirun: SIGKILL it when the supervisor dies, whatever kills it."""
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != supervisor:
        os._exit(137)


def _write_exit(run_dir: Path, info: dict[str, Any]) -> None:
    """exit.json, atomically; on a full disk the reserve file is given up to make room."""
    reserve = run_dir / RESERVE_NAME
    try:
        write_json(run_dir / EXIT_NAME, info, indent=None)
    except OSError:
        reserve.unlink(missing_ok=True)
        write_json(run_dir / EXIT_NAME, info, indent=None)
    reserve.unlink(missing_ok=True)


def _snapshot(log: JobLog, run_dir: Path, job: str, volumes: dict[str, str]) -> Any:
    """``--snapshot``: snapshot the volumes after a successful run (lanenb.backends.local.snapshot_run) and
    put a ``snapshot`` event in the log for every one; a failure is reported, not raised."""
    from lanenb.backends.local.snapshot_run import snapshot_run
    from lanenb_trainer.events import format_event

    try:
        made = snapshot_run(job, volumes, run_dir=run_dir, say=log.say)
    except Exception as exc:  # the run succeeded; a failed snapshot must not hide that
        log.say(f"snapshot failed: {exc}")
        # the same event a failed cluster snapshot sends, so every view says it, not only this log
        log.write(tag_line(0, "stdout", format_event("snapshot", 0, status="failed", error=str(exc)[:500],
                                                     store="local")), keep=True)
        return {"error": str(exc)}
    for snap in made:
        log.write(tag_line(0, "stdout", format_event(
            "snapshot", 0, snapshot=snap.id, role=snap.labels.get("role"), volume=snap.volume, size=snap.size,
            status="done", store="local")), keep=True)
    return [snap.id for snap in made]


def _run_launcher(argv: Sequence[str], env: dict[str, str], log: JobLog, stopper: Stopper) -> dict[str, Any]:
    """One start of mpirun, to its exit: its lines into ``job.log``; returns ``returncode``
    (and ``error`` when it could not start) with the orphans stopped after it."""
    try:
        stopper.child = subprocess.Popen(
            list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, preexec_fn=functools.partial(_die_with_supervisor, os.getpid()))
    except (OSError, subprocess.SubprocessError) as exc:
        log.say(f"could not start {argv[0]!r}: {exc}")
        return {"returncode": 127, "error": str(exc)}
    child = stopper.child
    assert child.stdout is not None
    if stopper.signals:  # a signal that came while mpirun was starting
        stopper.signals.clear()
        stopper.on_signal(signal.SIGTERM, None)
    raw = (r.decode("utf-8", errors="replace") for r in iter(child.stdout.readline, b""))
    for line in iter_output(raw):  # whole lines per rank, even when mpirun splits them
        log.write(tag_line(line.rank, line.stream, line.text))
    child.stdout.close()
    rc = child.wait()
    log.say(f"launcher exited with code {rc}")
    return {"returncode": rc, "orphans_stopped": stopper.reap_orphans()}


def _restart_why(rc: int) -> str:
    return "preempted" if rc == exitcodes.PREEMPTED else f"a process was killed (exit {rc})"


def supervise(argv: Sequence[str], run_dir: Path, log_path: Path, *, grace: float = DEFAULT_GRACE,
              max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
              snapshot: tuple[str, dict[str, str]] | None = None, max_restarts: int = 0) -> int:
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file size limit is a write error, not death
    try:
        (run_dir / RESERVE_NAME).write_bytes(b"\0" * 16384)
    except OSError:
        pass
    pid_dir = run_dir / PIDS_NAME
    pid_dir.mkdir(mode=0o700, exist_ok=True)
    for stale in [*pid_dir.glob("rank-*.json"), *pid_dir.glob("stopped-*")]:
        stale.unlink(missing_ok=True)

    with open(log_path, "ab", buffering=0) as fh, open(log_path.with_name(DIGEST_NAME), "ab", buffering=0) as dg:
        log = JobLog(fh, max_log_bytes, dg)
        stopper = Stopper(log, grace, pid_dir)
        signal.signal(signal.SIGTERM, stopper.on_signal)
        signal.signal(signal.SIGINT, stopper.on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the kernel's terminal going away is not a reason to stop
        log.say(f"started pid={os.getpid()} argv={json.dumps(list(argv))}")
        info: dict[str, Any] = {"started": started}
        if stopper.signals:  # cancelled while starting up: never start the ranks
            log.say(f"cancelled (signal {stopper.signals[0]}) before the launcher started")
            info.update(returncode=-stopper.signals[0])
        else:
            env = {**os.environ, PID_DIR_ENV: str(pid_dir)}
            restarts: list[dict[str, Any]] = []
            while True:
                info.update(_run_launcher(argv, env, log, stopper))
                rc = info["returncode"]
                # a signal to the supervisor is a person's cancel or suspend: never restarted
                if stopper.signals or not exitcodes.restartable(rc) or len(restarts) >= max_restarts:
                    break
                restarts.append({"t": round(time.time(), 3), "returncode": rc, "why": _restart_why(rc)})
                log.say(f"{_restart_why(rc)}: restart {len(restarts)} of {max_restarts}, "
                        "continuing from the run's last checkpoint")
                for stale in [*pid_dir.glob("rank-*.json"), *pid_dir.glob("stopped-*")]:
                    stale.unlink(missing_ok=True)
                env["MASTER_PORT"] = str(free_port())  # the last start's rendezvous port may linger
                env.pop(RESUMED_BY_ENV, None)  # this start is the supervisor's retry, not a person's resume
            info["restarts"] = restarts
            if info["returncode"] == 0 and snapshot is not None and not stopper.signals:
                info["snapshots"] = _snapshot(log, run_dir, *snapshot)
        if log.dropped:
            log.say(f"{log.dropped} output line(s) not written to job.log")
        info.update(finished=time.time(), signals=stopper.signals, log_bytes=log.size,
                    log_lines_dropped=log.dropped, log_error=log.error)
    _write_exit(run_dir, info)
    return 0 if info["returncode"] == 0 else 1


def main(args: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lanenb.backends.local.supervise",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--log", type=Path, default=None, help=f"default: RUN_DIR/{LOG_NAME}")
    parser.add_argument("--grace", type=float, default=DEFAULT_GRACE,
                        help="seconds a rank gets to stop after SIGTERM before SIGKILL")
    parser.add_argument("--max-log-bytes", type=int, default=DEFAULT_MAX_LOG_BYTES,
                        help="job.log size after which only @lanenb event lines are kept")
    parser.add_argument("--max-restarts", type=int, default=0, metavar="N",
                        help="start the launcher again up to N times after a preemption (exit 75) or a killed "
                             "process, never after an error or a cancel (default 0)")
    parser.add_argument("--snapshot-job", metavar="JOB", help="after success, snapshot --snapshot-volume dirs for JOB")
    parser.add_argument("--snapshot-volume", action="append", default=[], metavar="ROLE=DIR",
                        help="a directory to snapshot after success (repeatable)")
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="-- then the launcher command")
    ns = parser.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    if not argv:
        parser.error("no command given after --")
    if ns.grace < 0 or not math.isfinite(ns.grace):
        parser.error(f"--grace {ns.grace}: must be a finite number of seconds >= 0")
    if ns.max_log_bytes < 1:
        parser.error(f"--max-log-bytes {ns.max_log_bytes}: must be >= 1")
    if ns.max_restarts < 0:
        parser.error(f"--max-restarts {ns.max_restarts}: must be >= 0")
    volumes = dict(v.partition("=")[::2] for v in ns.snapshot_volume)
    if any(not role or not path for role, path in volumes.items()):
        parser.error(f"--snapshot-volume {ns.snapshot_volume}: each must be ROLE=DIR")
    return supervise(argv, ns.run_dir, ns.log or ns.run_dir / LOG_NAME, grace=ns.grace,
                     max_log_bytes=ns.max_log_bytes, max_restarts=ns.max_restarts,
                     snapshot=(ns.snapshot_job, volumes) if ns.snapshot_job and volumes else None)


if __name__ == "__main__":
    sys.exit(main())
