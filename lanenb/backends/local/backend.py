"""Local backend: mpirun on this machine, detached from the notebook kernel.

``submit`` only spawns the supervisor (``lanenb.backends.local.supervise``) in a new session
and returns; the supervisor owns mpirun and the ranks. All later questions (status, logs,
cancel) are answered from the handle (pid, process group, process start time) and the
files in the run dir (``exit.json``, ``cancel.json``, the ranks' ``pids/rank-<R>.json``), so a
different process can answer them after a kernel restart.

Stopping signals only processes it can prove are the job's: the supervisor (pid and start
time), its descendants, and processes whose environment carries the job's random marker
(``LANENB_JOB_MARKER``, set for the supervisor and inherited by mpirun and every rank). A
recorded process group is never signalled as a whole: after a reboot or a JupyterHub pod
restart its number can belong to a kernel, a shell or another job, which cancel leaves alone
and names in ``job.log``.

Each rank runs behind ``lanenb.launch.rankguard`` (dies with mpirun, records its pid), mpirun
dies with the supervisor, and the supervisor stops orphans: killing any process of the tree
takes the ranks down. A supervisor that vanished without ``exit.json`` makes the job
``LOST``; ``cancel()`` still finds the recorded ranks whatever the registry says.

Reading ``job.log`` is ``logfile.py``; what this machine offers (datasets, GPUs) is
``discovery.py``; this module is the protocol with the supervisor's files and processes.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from lanenb.backends.local.discovery import data_roots, find_datasets, local_gpu_count
from lanenb.backends.local.logfile import follow_lines, read_chunk, tail_text
from lanenb.backends.local.supervise import (
    DEFAULT_MAX_LOG_BYTES,
    EXIT_NAME,
    LOG_NAME,
    PIDS_NAME,
    SUPERVISOR_PREFIX,
)
from lanenb.contract.backend import Backend, JobStateError, LogChunk, LogLine, RunDirGoneError
from lanenb.contract.status import JobState, JobStatus
from lanenb.errors import SpecError
from lanenb.home import make_private_dir
from lanenb.launch import procs, rankguard
from lanenb.launch.mpirun import TRAINER_MODULE, build_mpirun_argv, find_mpirun, launch_env
from lanenb_trainer import exitcodes
from lanenb_trainer.atomic import write_json
from lanenb_trainer.config import parse_config
from lanenb_trainer.dataset_dirs import not_a_dataset
from lanenb_trainer.events import parse_line
from lanenb_trainer.stopping import CANCEL_NAME, RESUMED_BY_ENV, SUSPEND_NAME

if TYPE_CHECKING:
    from lanenb.contract.spec import TrainSpec

# data_roots, find_datasets, local_gpu_count: re-exported (they were defined here)
__all__ = ["LocalBackend", "find_datasets", "data_roots", "local_gpu_count"]

# Popen objects of supervisors this process started: kept so they are reaped (no zombies)
# and never garbage-collected while running.
_SPAWNED: dict[int, subprocess.Popen] = {}

JOB_MARKER_ENV = "LANENB_JOB_MARKER"  # a random value per job, in the environment of all its processes
RANKS_TTL_S = 1.0  # how long a scan of a job's rank processes answers status() calls
_RANKS_CACHE: dict[tuple[int, float], tuple[float, dict[str, str]]] = {}


def _check_checkpoint(folder: Path) -> None:
    """Refuse a resume before anything starts when ``last.pt`` is damaged and no good ``best.pt``
    can stand in (the trainer continues from ``best.pt`` then, saying so); no ``last.pt`` at all
    is the trainer's to handle (a run stopped before its first checkpoint starts over)."""
    from lanenb_trainer import checkpoint as ckpt  # torch: only when a resume needs it

    if not (folder / "last.pt").is_file():
        return
    try:
        ckpt.resumable(folder / "last.pt")
    except ckpt.DamagedCheckpointError as exc:
        raise JobStateError(str(exc)) from None


def _harmless(line: str) -> bool:
    """A line of ``supervisor.err`` that explains nothing about a lost job: Python's warnings
    (``runpy``'s "found in sys.modules" RuntimeWarning and the source line it quotes)."""
    text = line.strip()
    return not text or "Warning:" in text or text.startswith("warn(") or text.startswith("warnings.warn")


def _cores() -> int:
    """CPU cores this process may run on (a container's or taskset's share, not the host's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class LocalBackend(Backend):
    """Runs ``spec.processes`` ranks with mpirun on this machine.

    ``program`` replaces ``python -m lanenb_trainer`` (the argv each rank runs, before the
    trainer flags); ``trainer_args=False`` drops the trainer flags, which is how the tests run
    a tiny MPI program through exactly the same supervisor. ``grace`` is how long a rank gets
    to stop after its one SIGTERM before SIGKILL. ``max_log_bytes`` caps ``job.log`` (past it
    only ``@lanenb`` event lines are kept, past twice it none).
    """

    name = "local"
    runs_here = True
    # a resume relaunches from the spec: loader workers, and the rank count (the trainer decides
    # whether a checkpoint of another world size can go on)
    resume_changes = frozenset({"num_workers", "processes"})

    def __init__(self, *, program: Sequence[str] | None = None, trainer_args: bool = True,
                 grace: float = 10.0, python: str | None = None, poll_interval: float = 0.1,
                 max_log_bytes: int = DEFAULT_MAX_LOG_BYTES) -> None:
        if not (grace >= 0 and math.isfinite(grace)):
            raise ValueError(f"grace={grace!r}: must be a finite number of seconds >= 0")
        if not isinstance(max_log_bytes, int) or max_log_bytes < 1:
            raise ValueError(f"max_log_bytes={max_log_bytes!r}: must be an integer >= 1")
        self.max_log_bytes = max_log_bytes
        self.program = list(program) if program is not None else None
        self.use_trainer_args = trainer_args
        self.grace = float(grace)
        self.python = python or sys.executable
        self.poll_interval = poll_interval
        self._checked: tuple[Any, ...] | None = None  # the argv and env the trainer's checks last passed

    def capacity(self, spec: TrainSpec | None = None) -> dict[str, int]:
        """GPUs if this machine has any (one rank per GPU: a rank computes on one GPU, so one
        per process is the most that helps), else its CPU cores."""
        gpus = local_gpu_count()
        cores = _cores()
        if gpus:
            return {"processes": gpus, "gpus": gpus, "gpus_per_process": 1}
        return {"processes": cores, "gpus": 0, "gpus_per_process": 0}

    def check_capacity(self, spec: TrainSpec) -> None:
        """Refuse more ranks than this machine can run, before anything starts, with the fix in
        one line: fewer ranks, ``--oversubscribe`` (the user's explicit yes), or a cluster.

        The bound: with ``gpus >= 1`` per rank, the GPUs those ranks need; otherwise the CPU
        cores (a CPU rank already uses several threads; two per core only slow both down).

        Raises:
            SpecError: ``processes`` is above the bound and ``local.oversubscribe`` is off.
        """
        options = spec.options("local")
        if getattr(options, "oversubscribe", False):
            return
        if spec.gpus:
            gpus = local_gpu_count()
            most, what = gpus // spec.gpus, f"{gpus} GPU(s) at {spec.gpus} per rank"
        else:
            most = _cores()
            what = f"{most} CPU core(s)"
        if spec.processes > most:
            raise SpecError("processes", spec.processes,
                            f"more ranks than this machine runs ({what}); use -np <= {max(1, most)} here "
                            f"(processes={max(1, most)}), or --oversubscribe (local={{'oversubscribe': True}}), "
                            f"or --backend kubernetes")

    def datasets(self, spec: TrainSpec | None = None) -> list[str]:
        return find_datasets()

    # ---------------------------------------------------------------- argv
    def launcher_argv(self, spec: TrainSpec, run_dir: str | Path) -> list[str]:
        """The mpirun argv the supervisor runs (never a shell string), built by the trainer
        launcher so local jobs and ``lanenb train`` run ranks the same way."""
        args = spec.trainer_args(str(run_dir)) if self.use_trainer_args else []
        if self.use_trainer_args:
            # the trainer's own validation, before anything starts: a missing dataset fails
            # here in the notebook cell, not in a detached process. Once per argv and env:
            # validate() and submit() build the same argv, and the ranks check it again anyway
            env = {**os.environ, **spec.env}
            key = (tuple(args), tuple(sorted(env.items())))
            if key != self._checked:
                parse_config(args, env=env)
                self._checked = key
        # the rank guard makes each rank die with mpirun and records its pid
        argv = build_mpirun_argv(spec.processes, args, env=sorted(spec.env), python=self.python,
                                 hosts=None, mpirun=find_mpirun(), wrapper=[self.python, rankguard.__file__])
        if self.program is None:
            return argv
        # swap "python [-u] -m lanenb_trainer" for the given program, keeping mpirun's options
        for j in range(1, len(argv)):
            if argv[j] == TRAINER_MODULE and argv[j - 1] == "-m":
                i = max(k for k in range(j) if argv[k] == self.python)
                return argv[:i] + self.program + argv[j + 1:]
        raise RuntimeError(f"cannot find the trainer entry point in the mpirun argv {argv}")

    # ---------------------------------------------------------------- Backend API
    def validate(self, spec: TrainSpec, run_dir: str | Path | None) -> None:
        """The rank count against this machine, the trainer's own checks (flags, the dataset
        folder exists), then whether that folder is a dataset. A program that is not the trainer
        (``trainer_args=False``) reads no dataset."""
        self.check_capacity(spec)
        self.launcher_argv(spec, run_dir or spec.run_dir or ".")
        if self.use_trainer_args:
            problem = not_a_dataset(spec.dataset)
            if problem:
                raise SpecError("dataset", spec.dataset, problem)

    def submit(self, spec: TrainSpec, run_dir: str | Path | None) -> dict[str, Any]:
        """Spawn the supervisor in a new session and return its handle; ``run_dir`` is required
        here (None is only for remote backends, which choose a path in the cluster)."""
        return self._start(spec, run_dir, {})

    def _start(self, spec: TrainSpec, run_dir: str | Path | None, extra_env: dict[str, str]) -> dict[str, Any]:
        if run_dir is None:
            raise TypeError("the local backend runs a job in a local directory: run_dir must be a path, not None")
        run = make_private_dir(Path(run_dir).expanduser().resolve())
        for stale in (EXIT_NAME, CANCEL_NAME, SUSPEND_NAME):  # a reused run dir must not look finished
            (run / stale).unlink(missing_ok=True)
        log_path = run / LOG_NAME
        argv = self.launcher_argv(spec, run)
        env = launch_env(os.environ, extra={**spec.env, **extra_env})  # rendezvous port, unbuffered ranks
        marker = secrets.token_hex(16)  # proves later which processes are this job's (see _owned)
        env[JOB_MARKER_ENV] = marker
        cmd = [self.python, "-m", "lanenb.backends.local.supervise", "--run-dir", str(run),
               "--log", str(log_path), "--grace", repr(self.grace), "--max-log-bytes", str(self.max_log_bytes),
               "--max-restarts", str(spec.max_restarts)]
        if spec.enable_snapshot:  # run dir + dataset snapshotted by the supervisor after success
            assert spec.name is not None  # generated in TrainSpec.__post_init__
            cmd += ["--snapshot-job", spec.name, "--snapshot-volume", f"run={run}",
                    "--snapshot-volume", f"dataset={Path(spec.dataset).expanduser().resolve()}"]
        cmd += ["--", *argv]
        with open(run / "supervisor.err", "ab") as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True, close_fds=True, env=env, cwd=str(run))
        try:
            create_time = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            create_time = None
        for pid, earlier in list(_SPAWNED.items()):  # reap finished supervisors (no zombies)
            if earlier.poll() is not None:
                del _SPAWNED[pid]
        _SPAWNED[proc.pid] = proc
        return {
            "pid": proc.pid, "pgid": proc.pid, "create_time": create_time, "marker": marker,
            "host": socket.gethostname(), "run_dir": str(run), "log": str(log_path), "argv": argv,
        }

    def _supervisor(self, handle: dict[str, Any]) -> psutil.Process | None:
        """The supervisor process if it is still alive (and is the same process, not a reused pid)."""
        spawned = _SPAWNED.get(int(handle.get("pid", 0) or 0))
        if spawned is not None and spawned.poll() is not None:
            return None  # our own child, now reaped
        try:
            proc = psutil.Process(int(handle["pid"]))
            if handle.get("create_time") is None:
                # no start time recorded: a bare pid proves nothing (it may be anyone's by now);
                # only the job's marker in the process's environment does (fail closed)
                if not self._owned(proc, handle):
                    return None
            elif abs(proc.create_time() - handle["create_time"]) > 0.01:
                return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                try:
                    os.waitpid(proc.pid, os.WNOHANG)  # our own child (same process that submitted)
                except ChildProcessError:
                    pass
                return None
            return proc
        except (psutil.Error, KeyError, ValueError):
            return None

    @staticmethod
    def _owned(proc: psutil.Process, handle: dict[str, Any]) -> bool:
        """Whether ``proc`` carries this job's marker in its environment (``/proc/PID/environ``,
        as it was when the process started). A process whose environment cannot be read (another
        user's) or a job recorded before markers existed proves nothing: not ours."""
        marker = handle.get("marker")
        if not marker:
            return False
        try:
            return proc.environ().get(JOB_MARKER_ENV) == marker
        except (psutil.Error, OSError):
            return False

    @classmethod
    def _recorded_ranks(cls, handle: dict[str, Any]) -> list[psutil.Process]:
        """Rank processes from the pid files their guards wrote, if still the same processes
        (start time, and the job's marker when the job has one)."""
        ranks = []
        for path in sorted((Path(handle["run_dir"]) / PIDS_NAME).glob("rank-*.json")):
            info = _read_json(path) or {}
            try:
                pid = int(info["pid"])
                if rankguard._start_ticks(pid) != info.get("start_ticks"):
                    continue  # gone, or the pid now belongs to another process
                proc = psutil.Process(pid)
                if handle.get("marker") and not cls._owned(proc, handle):
                    continue  # same pid and start tick, yet not this job's (another boot, another pod)
                if proc.status() != psutil.STATUS_ZOMBIE:
                    ranks.append(proc)
            except (KeyError, TypeError, ValueError, psutil.Error):
                continue
        return ranks

    def _group_processes(self, handle: dict[str, Any]) -> list[psutil.Process]:
        """The job's processes: the supervisor, its descendants, the recorded ranks (which live
        in process groups of their own) and what is left in its process group with the job's
        marker."""
        return self._scan(handle)[0]

    def _scan(self, handle: dict[str, Any]) -> tuple[list[psutil.Process], list[psutil.Process]]:
        """(the job's processes, strangers): strangers are in the recorded process group but
        cannot be proved the job's (no marker: the group number was reused)."""
        found: dict[int, psutil.Process] = {p.pid: p for p in self._recorded_ranks(handle)}
        sup = self._supervisor(handle)
        if sup is not None:
            found[sup.pid] = sup
            try:
                for child in sup.children(recursive=True):
                    found[child.pid] = child
            except psutil.Error:
                pass
        strangers: list[psutil.Process] = []
        pgid = handle.get("pgid")
        if pgid:
            for proc in psutil.process_iter(["pid"]):
                try:
                    if proc.pid in found or os.getpgid(proc.pid) != pgid or proc.status() == psutil.STATUS_ZOMBIE:
                        continue
                except (OSError, psutil.Error):
                    continue
                if self._owned(proc, handle):
                    found[proc.pid] = proc
                elif proc.pid != os.getpid():
                    strangers.append(proc)
        return list(found.values()), strangers

    def status(self, spec: TrainSpec, handle: dict[str, Any]) -> JobStatus:
        if not handle:
            return JobStatus(JobState.PENDING, reason="not started yet")
        run = Path(handle["run_dir"])
        finished = self._finished_status(handle)
        if finished is not None:
            return finished
        if handle.get("host") and handle["host"] != socket.gethostname():
            return JobStatus(JobState.UNKNOWN, reason=(
                f"the job runs on host {handle['host']!r}, not this machine ({socket.gethostname()!r})"))
        sup = self._supervisor(handle)
        if sup is not None:
            ranks = self._rank_states(sup)
            return JobStatus(JobState.RUNNING, started=handle.get("create_time"), ranks=ranks,
                             message=f"supervisor pid {sup.pid}, {len(ranks)} rank process(es) alive")
        # the supervisor may have written exit.json just before exiting: look once more
        finished = self._finished_status(handle)
        if finished is not None:
            return finished
        cancel = _read_json(run / CANCEL_NAME)
        if cancel is not None:
            return JobStatus(JobState.CANCELLED, reason="cancelled by user", finished=cancel.get("time"))
        suspend = _read_json(run / SUSPEND_NAME)
        if suspend is not None:  # the machine went down while the suspend was stopping the ranks
            return JobStatus(JobState.SUSPENDED, reason=self._suspended_reason(handle),
                             started=handle.get("create_time"))
        return JobStatus(JobState.LOST, reason=self._lost_reason(handle), finished=time.time())

    def _lost_reason(self, handle: dict[str, Any]) -> str:
        """Why a job whose supervisor vanished without exit.json is lost, with what is known."""
        run = Path(handle["run_dir"])
        if not run.is_dir():
            return f"its run dir {run} was deleted (the supervisor could not record how the job ended)"
        reason = (f"the supervisor (pid {handle.get('pid')}) is gone without recording an exit status "
                  "(killed, out of memory or disk space, or the machine rebooted)")
        try:
            free = shutil.disk_usage(run).free
            if free < 1 << 20:
                reason += f"; the run dir's disk has {free} bytes free"
        except OSError:
            pass
        errors = [e for e in tail_text(run / "supervisor.err", tail_bytes=2048) if not _harmless(e)]
        if errors:
            reason += f"; its last error output: {errors[-1].strip()}"
        left = self._recorded_ranks(handle)
        if left:
            reason += f"; {len(left)} rank process(es) still running (cancel() stops them)"
        return reason + f"; log: {handle.get('log')}"

    def _finished_status(self, handle: dict[str, Any]) -> JobStatus | None:
        run = Path(handle["run_dir"])
        exit_info = _read_json(run / EXIT_NAME)
        if exit_info is None:
            return None
        rc = int(exit_info.get("returncode", -1))
        started, finished = exit_info.get("started"), exit_info.get("finished")
        message = None
        if exit_info.get("log_error"):  # the job ran on; its log stopped (disk full, size limit)
            message = f"job.log is incomplete: {exit_info['log_error']}"
        elif exit_info.get("log_lines_dropped"):
            message = f"job.log was capped: {exit_info['log_lines_dropped']} output line(s) not kept"
        if _read_json(run / CANCEL_NAME) is not None:
            return JobStatus(JobState.CANCELLED, reason="cancelled by user", started=started,
                             finished=finished, exit_code=rc, message=message)
        if rc == 0:  # a suspend that came after the last step: the run is done, nothing to resume
            return JobStatus(JobState.SUCCEEDED, started=started, finished=finished, exit_code=0, message=message)
        if _read_json(run / SUSPEND_NAME) is not None:
            return JobStatus(JobState.SUSPENDED, reason=self._suspended_reason(handle), started=started,
                             exit_code=rc, message=message)
        if rc == exitcodes.PREEMPTED:
            return JobStatus(JobState.PREEMPTED, reason=self._preempted_reason(handle, exit_info), started=started,
                             finished=finished, exit_code=rc, message=message)
        reason = self._failure_reason(handle, rc, exit_info)
        if exit_info.get("log_error"):
            reason += f"; {message}"
        return JobStatus(JobState.FAILED, reason=reason, started=started, finished=finished, exit_code=rc,
                         message=message)

    def _rank_states(self, sup: psutil.Process) -> dict[str, str]:
        """Rank processes are the launcher's descendants that run the rank program; one scan
        of the machine's processes per supervisor per ``RANKS_TTL_S`` (a list of running jobs
        and every view of them ask at once)."""
        try:
            key = (sup.pid, sup.create_time())
        except psutil.Error:
            return {}
        cached = _RANKS_CACHE.get(key)
        if cached is not None and time.monotonic() - cached[0] < RANKS_TTL_S:
            return dict(cached[1])
        ranks = self._scan_ranks(sup)
        for old in [k for k, (t, _) in _RANKS_CACHE.items() if time.monotonic() - t >= RANKS_TTL_S]:
            _RANKS_CACHE.pop(old, None)
        _RANKS_CACHE[key] = (time.monotonic(), ranks)
        return dict(ranks)

    def _scan_ranks(self, sup: psutil.Process) -> dict[str, str]:
        ranks: dict[str, str] = {}
        try:
            children = sup.children(recursive=True)
        except psutil.Error:
            return ranks
        for proc in children:
            try:
                env_rank = None
                try:
                    env_rank = proc.environ().get("OMPI_COMM_WORLD_RANK")
                except (psutil.AccessDenied, psutil.ZombieProcess):
                    pass
                if env_rank is not None:
                    ranks[env_rank] = proc.status()
            except psutil.Error:
                continue
        return dict(sorted(ranks.items(), key=lambda kv: int(kv[0])))

    def _preempted_reason(self, handle: dict[str, Any], exit_info: dict[str, Any]) -> str:
        """Where the last preemption stopped the run (its ``preempted`` event), and the restarts used."""
        last = None
        for line in tail_text(Path(handle["log"]), tail_bytes=256 * 1024):
            ev = parse_line(line)
            if ev is not None and ev.kind == "preempted":
                last = ev
        where = f" at step {last.get('step')}" if last is not None else ""
        used = len(exit_info.get("restarts") or [])
        return (f"a SIGTERM stopped every rank{where} with a checkpoint in {handle.get('run_dir')} after {used} "
                f"restart{'s' if used != 1 else ''} (max_restarts); job.resume() (or `lanenb jobs resume "
                "NAME`) continues from it")

    def _suspended_reason(self, handle: dict[str, Any]) -> str:
        """Where the suspend stopped the run (its ``preempted`` event), and how to go on."""
        last = None
        for line in tail_text(Path(handle["log"]), tail_bytes=256 * 1024):
            ev = parse_line(line)
            if ev is not None and ev.kind == "preempted":
                last = ev
        where = (f"every rank stopped at step {last.get('step')} with a checkpoint" if last is not None
                 else "the ranks stopped before a checkpoint of this launch")
        return f"suspended by user: {where}; resume() continues from {handle.get('run_dir')}"

    def _failure_reason(self, handle: dict[str, Any], rc: int, exit_info: dict[str, Any]) -> str:
        if exit_info.get("error"):
            return f"could not start the launcher: {exit_info['error']}"
        reason = f"launcher exited with code {rc}"
        if rc < 0:  # a signal ended mpirun itself, not a rank's exit status passed on
            try:
                reason += f" (mpirun was killed by {signal.Signals(-rc).name})"
            except ValueError:
                reason += f" (mpirun was killed by signal {-rc})"
        # the trainer emits an "error" event before dying: tell the user what it said
        last_error = None
        for line in tail_text(Path(handle["log"]), tail_bytes=256 * 1024):
            ev = parse_line(line)
            if ev is not None and ev.kind == "error":
                last_error = ev
        if last_error is not None:
            msg = last_error.get("message") or last_error.get("error") or json.dumps(last_error.data)
            reason += f"; rank {last_error.rank} reported: {msg}"
        used = len(exit_info.get("restarts") or [])
        if used:
            reason += f"; after {used} restart{'s' if used != 1 else ''} (max_restarts)"
        return reason

    def logs(self, spec: TrainSpec, handle: dict[str, Any], *, follow: bool = False,
             worker: int | None = None) -> Iterator[LogLine]:
        if not handle:
            return iter(())
        lines = follow_lines(Path(handle["log"]), Path(handle["run_dir"]) / EXIT_NAME, follow=follow,
                             worker=worker, running=lambda: self._supervisor(handle) is not None,
                             poll_interval=self.poll_interval)
        return lines  # redacted by the job layer (Job.logs), whatever the backend

    def read_log(self, spec: TrainSpec, handle: dict[str, Any], cursor: str | None, *, max_lines: int = 5000,
                 tail_lines: int | None = None) -> LogChunk:
        """Seek to byte offset ``cursor`` in ``job.log`` and return the whole lines after it."""
        if not handle:
            return LogChunk([], cursor, False)
        run = Path(handle["run_dir"])
        if not run.is_dir():
            if self._supervisor(handle) is None:  # over: a finished job's list row stays as recorded
                return LogChunk([], cursor, True)
            raise RunDirGoneError(f"the run dir {run} of this job was deleted: its log, checkpoints and metrics "
                                  f"are gone (other jobs are unaffected; `lanenb jobs prune` forgets this one once "
                                  f"it has ended)")
        # decided before reading: once the output is closed nothing is appended any more
        closed = (Path(handle["run_dir"]) / EXIT_NAME).exists() or self._supervisor(handle) is None
        return read_chunk(Path(handle["log"]), cursor, closed=closed, max_lines=max_lines, tail_lines=tail_lines)

    def cancel(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        """Stop the job and mark it cancelled (``cancel.json``), unless it has already ended.

        One SIGTERM to the supervisor, which gives each rank one SIGTERM and ``grace``
        seconds to write its ``end(status=cancelled)`` event before SIGKILL (see
        ``supervise``); what is still alive after that is killed from here.
        """
        if not handle:
            return
        run = Path(handle["run_dir"])
        if (run / EXIT_NAME).exists():
            finished = self._finished_status(handle)
            if finished is not None and finished.state is JobState.SUSPENDED:  # nothing runs: the pause ends it
                write_json(run / CANCEL_NAME, {"time": time.time(), "by_pid": os.getpid()}, indent=None)
            return  # already over: nothing to stop, keep its real outcome
        self._check_host(handle)
        write_json(run / CANCEL_NAME, {"time": time.time(), "by_pid": os.getpid()}, indent=None)
        self._stop(handle)

    def suspend(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        """Stop the ranks the way a preemption does and keep the job: ``suspend.json``, then the
        supervisor's SIGTERM, which gives each rank one SIGTERM (every rank checkpoints at the
        next step boundary and exits 75) and is never answered with a restart. Returns once
        no process of the job is left (the cores are free); ``status`` then reads SUSPENDED.

        Raises:
            JobStateError: the job has already ended (nothing to suspend).
            RuntimeError: the job runs on another machine.
        """
        if not handle or (Path(handle["run_dir"]) / EXIT_NAME).exists():
            raise JobStateError(f"job {spec.name!r} is not running: nothing to suspend")
        self._check_host(handle)
        write_json(Path(handle["run_dir"]) / SUSPEND_NAME, {"time": time.time(), "by_pid": os.getpid()}, indent=None)
        self._stop(handle)

    def resume(self, spec: TrainSpec, handle: dict[str, Any], *, from_checkpoint: bool = True) -> dict[str, Any]:
        """Start a suspended or preempted job again: a new supervisor over the same run dir and
        log, with ``spec``'s command (``--run-id`` the job's name, so the trainer continues from
        the run's ``last.pt``). Needs only the handle and the run dir: it works from a new
        process, after the machine restarted.

        Raises:
            JobStateError: ``from_checkpoint=False`` (a local run always continues from its own
                checkpoint: submit a new job to start over), or processes of the job still run.
            RuntimeError: the job ran on another machine.
        """
        if not from_checkpoint:
            raise JobStateError("from_checkpoint=False: a local job always continues from its run's last checkpoint "
                                "(the trainer's --run-id rule); submit a new job to start over")
        self._check_host(handle)
        if self._supervisor(handle) is not None or self._recorded_ranks(handle):
            raise JobStateError(f"job {spec.name!r} still has running processes: suspend() or cancel() it first")
        _check_checkpoint(Path(handle["run_dir"]) / "checkpoints")
        (Path(handle["run_dir"]) / SUSPEND_NAME).unlink(missing_ok=True)
        return self._start(spec, handle["run_dir"], {RESUMED_BY_ENV: "user"})  # the ranks' `resumed` says who

    def stop_leftovers(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        """Stop whatever of a finished (or lost) job still runs, without marking it cancelled.
        Only processes proved the job's are signalled; others found in its old process group
        are left alone and named in ``job.log``."""
        if not handle or (handle.get("host") and handle["host"] != socket.gethostname()):
            return
        ours, strangers = self._scan(handle)  # one pass over the machine's processes
        if self._supervisor(handle) is not None or ours:
            self._stop(handle)
        else:
            self._say_left_alone(handle, strangers)

    def _say_left_alone(self, handle: dict[str, Any], strangers: list[psutil.Process]) -> None:
        """One ``job.log`` line (shown as the supervisor's) naming processes cancel did not signal."""
        if not strangers:
            return
        names = []
        for proc in strangers[:10]:
            try:
                names.append(f"pid {proc.pid} ({proc.name()})")
            except psutil.Error:
                names.append(f"pid {proc.pid}")
        text = (f"cancel: {len(strangers)} process(es) in the job's old process group {handle.get('pgid')} were not "
                f"signalled: nothing proves they belong to this job (the group number was reused?): "
                f"{', '.join(names)}")
        try:
            with open(handle["log"], "a", encoding="utf-8") as fh:
                fh.write(SUPERVISOR_PREFIX + text + "\n")
        except (OSError, KeyError):  # a deleted run dir: nothing to tell it in
            pass

    def _check_host(self, handle: dict[str, Any]) -> None:
        if handle.get("host") and handle["host"] != socket.gethostname():
            # its pids mean nothing here: signalling them could hit unrelated processes
            raise RuntimeError(f"job runs on host {handle['host']!r}; cancel it from that machine "
                               f"(this is {socket.gethostname()!r})")

    def _stop(self, handle: dict[str, Any]) -> None:
        """One SIGTERM, a grace period, SIGKILL (``procs.terminate``): to the supervisor if it
        is alive (it runs the ranks' stop sequence and writes exit.json: it gets the ranks'
        grace, then mpirun's wind-down, SIGKILLed after another grace period), else to the
        recorded ranks and what is left in its process group with the job's marker. Whatever of
        the job still runs after that is killed, process by process."""
        sup = self._supervisor(handle)
        ours, strangers = self._scan(handle)
        self._say_left_alone(handle, strangers)
        # never the whole process group: its number may have been reused by the time we signal
        if sup is not None:
            procs.terminate([sup], 2 * self.grace + 10)
        else:
            procs.terminate(ours, self.grace)
        leftovers = self._group_processes(handle)
        if leftovers:
            procs.kill(leftovers)
        spawned = _SPAWNED.get(int(handle.get("pid", 0) or 0))
        if spawned is not None:  # reap the supervisor if this very process started it
            spawned.poll()

    def describe(self, spec: TrainSpec, handle: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {"handle": handle}
        if not handle:
            return info
        run = Path(handle["run_dir"])
        info["exit"] = _read_json(run / EXIT_NAME)
        info["cancel"] = _read_json(run / CANCEL_NAME)
        listed = []
        for proc in self._group_processes(handle):
            try:
                listed.append({"pid": proc.pid, "name": proc.name(), "status": proc.status(),
                               "cmdline": proc.cmdline()})
            except psutil.Error:
                continue
        info["processes"] = listed
        info["log_tail"] = tail_text(Path(handle["log"]), tail_bytes=4096)[-20:]
        return info
