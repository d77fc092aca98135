"""Run trainer ranks with ``mpirun`` and stream their output line by line with its rank.

Reusable pieces for every launcher: :func:`build_mpirun_argv` (an argv list, never a shell
string), :func:`trainer_argv`, :func:`start_local` (mpirun in its own process group, so a
notebook kernel restart does not kill it and Ctrl-C/cancel reaches every rank),
:func:`stop_ranks` and :func:`stop`. :func:`run_local` puts them together for the CLI, with
``lanenb.launch.lines.iter_output`` turning mpirun's tagged output into whole lines.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any

from lanenb.launch.lines import LogLine, iter_output
from lanenb.launch.lines import TaggedOutputParser as TaggedOutputParser  # re-exported: it was defined here
from lanenb.launch.procs import send_signal, terminate
from lanenb_trainer.errors import UserError

TRAINER_MODULE = "lanenb_trainer"
# Variables every rank needs, exported with -x (remote ranks only see what is exported).
DEFAULT_EXPORTS = ("MASTER_ADDR", "MASTER_PORT", "PYTHONUNBUFFERED")


class LaunchError(UserError, RuntimeError):
    """mpirun is missing or the launch request is invalid."""


def find_mpirun(mpirun: str = "mpirun") -> str:
    path = shutil.which(mpirun)
    if path is None:
        raise LaunchError(f"{mpirun!r} not found on PATH: install Open MPI "
                          "(apt-get install openmpi-bin libopenmpi-dev) or pass the full path")
    return path


def free_port() -> int:
    """An unused TCP port for torch.distributed's rendezvous on this host."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def trainer_argv(**options: Any) -> list[str]:
    """Trainer flags from keyword options: ``batch_size=4`` → ``--batch-size 4``;
    ``True`` → ``--flag``, ``False`` → ``--no-flag`` (nothing for a switch without a ``--no-``
    form), ``None`` → omitted. The trainer's own spelling (``lanenb_trainer.flags.to_flags``),
    so the launcher and ``TrainConfig.to_argv`` cannot disagree."""
    from lanenb_trainer.flags import to_flags

    return to_flags(options)


def build_mpirun_argv(
    processes: int,
    trainer_args: Sequence[str],
    *,
    env: Mapping[str, str] | Iterable[str] = (),
    python: str = sys.executable,
    hosts: Sequence[str] | None = None,
    mpirun: str = "mpirun",
    extra_mpi_args: Sequence[str] = (),
    allow_root: bool | None = None,
    program: Sequence[str] | None = None,
    wrapper: Sequence[str] = (),
    entrypoint: Sequence[str] | None = None,
    oversubscribe: bool = True,
    default_exports: Sequence[str] = DEFAULT_EXPORTS,
) -> list[str]:
    """The full mpirun command line running ``python -m lanenb_trainer`` on ``processes`` ranks.

    The one mpirun argv builder: local jobs, ``lanenb train`` and the MPIJob launcher
    (``kubernetes.manifests.mpirun_argv``) all call it, so rank placement, output tagging and
    exports cannot drift apart.

    Args:
        processes: number of ranks (``-np``).
        trainer_args: the trainer's flags, appended last (each one argv element).
        env: names of variables to export to every rank (``-x NAME``; values come from the
            environment mpirun runs in, so secrets never appear in the argv).
        python: the interpreter each rank runs (``python -u``).
        hosts: ``host[:slots]`` entries for multi-node runs (the MPI Operator writes a
            hostfile instead).
        mpirun: the mpirun executable.
        extra_mpi_args: more mpirun options (``--mca`` settings...), before the program.
        allow_root: add ``--allow-run-as-root`` (default: when running as root).
        program: replaces ``-m lanenb_trainer`` (e.g. a benchmark script path).
        wrapper: argv put in front of the rank's program (the local rank guard).
        entrypoint: replaces ``python -u -m lanenb_trainer`` as a whole (the container
            image's ENTRYPOINT on Kubernetes).
        oversubscribe: allow more ranks than slots (one machine, ranks >= cores).
        default_exports: variables always exported before ``env``.

    Raises:
        LaunchError: ``processes`` is not an integer >= 1, or an ``env`` name is invalid.
    """
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        raise LaunchError(f"processes must be an integer >= 1, got {processes!r}")
    names = list(env.keys()) if isinstance(env, Mapping) else list(env)
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise LaunchError(f"cannot export {name!r}: not a valid environment variable name")
    argv = [mpirun, "-np", str(processes), *(["--oversubscribe"] if oversubscribe else []), "--tag-output",
            "--bind-to", "none", "--map-by", "slot"]
    if allow_root is None:
        allow_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if allow_root:
        argv.append("--allow-run-as-root")
    if hosts:
        argv += ["--host", ",".join(hosts)]
    for name in dict.fromkeys([*default_exports, *names]):
        argv += ["-x", name]
    argv += list(extra_mpi_args)
    if entrypoint is None:
        entrypoint = [python, "-u", *(program if program else ["-m", TRAINER_MODULE])]
    argv += [*wrapper, *entrypoint, *trainer_args]
    return argv


def launch_env(base: Mapping[str, str] | None = None, *, master_addr: str = "127.0.0.1",
               master_port: int | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a local mpirun: rendezvous address for DDP, unbuffered Python."""
    env = dict(os.environ if base is None else base)
    env.setdefault("MASTER_ADDR", master_addr)
    env["MASTER_PORT"] = str(master_port or env.get("MASTER_PORT") or free_port())
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def start_local(processes: int, trainer_args: Sequence[str], *, env: Mapping[str, str] | None = None,
                export: Iterable[str] = (), cwd: str | None = None, python: str = sys.executable,
                stdout: int | IO[str] | None = subprocess.PIPE,
                program: Sequence[str] | None = None) -> subprocess.Popen:
    """Start mpirun in its own session/process group with stderr merged into stdout.

    With at least as many ranks as cores, MPI's busy-polling would steal the cores the ranks
    compute on (Horovod's background thread waits in MPI), so idle ranks yield instead.
    """
    extra = ["--mca", "mpi_yield_when_idle", "1"] if processes >= (os.cpu_count() or 1) else []
    argv = build_mpirun_argv(processes, trainer_args, env=list(export), python=python,
                             mpirun=find_mpirun(), program=program, extra_mpi_args=extra)
    return subprocess.Popen(
        argv, env=dict(env if env is not None else launch_env()), cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=stdout, stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True,
        errors="replace",
    )


def stop_ranks(mpirun_pid: int, ranks: Sequence[Any], grace: float, *, sig: int = signal.SIGTERM,
               say: Callable[[str], None] | None = None, ready: Callable[[Any], bool] | None = None) -> int:
    """Give each rank exactly one ``sig`` and ``grace`` seconds, then SIGKILL; returns how
    many ranks had to be killed.

    mpirun is held (SIGSTOP) meanwhile and continued afterwards: Open MPI reacts to the first
    rank that exits non-zero by killing the others after one second, and to a second
    signal by terminating at once, either of which would cut off a rank that is still
    writing its last checkpoint and its ``end(status=cancelled)`` event. The ranks' output
    waits in their pipes and is forwarded when mpirun continues. ``ranks`` are
    ``psutil.Process`` objects (mpirun's direct children); the sequence is
    ``lanenb.launch.procs.terminate``.

    ``ready(rank)``: the rank has written its checkpoint and last event (the trainer says so,
    ``lanenb_trainer.stopping.say_stopped``). Once every rank still running is ready, mpirun is
    let go on at once: a Horovod rank's MPI finalize needs mpirun (its PMIx server), so a held
    mpirun kept every stop waiting out the whole grace and SIGKILLing ranks that had finished.
    """

    def tell(alive: list[Any]) -> None:
        if say is not None:
            say(f"{len(alive)} rank(s) still running after {grace:g} s: SIGKILL")

    held = [True]

    def release() -> None:
        send_signal(mpirun_pid, signal.SIGCONT)
        held[0] = False

    send_signal(mpirun_pid, signal.SIGSTOP)
    try:
        return len(terminate(ranks, grace, sig=sig, on_kill=tell, on_ready=release,
                             ready=None if ready is None else (lambda alive: all(ready(p) for p in alive))))
    finally:
        if held[0]:
            send_signal(mpirun_pid, signal.SIGCONT)


def stop(proc: subprocess.Popen, *, grace: float = 10.0, sig: int = signal.SIGTERM) -> int:
    """Stop mpirun and every rank: one ``sig`` to each rank (ranks live in process groups of
    their own), SIGKILL after ``grace`` s (see :func:`stop_ranks`), then mpirun winds down;
    its process group gets SIGKILL if it has not exited ``grace`` s later.
    """
    import psutil

    if proc.poll() is not None:
        return proc.returncode
    try:
        ranks = psutil.Process(proc.pid).children()
    except psutil.NoSuchProcess:
        ranks = []
    stop_ranks(proc.pid, ranks, grace, sig=sig)
    try:
        proc.wait(timeout=grace + 5)
    except subprocess.TimeoutExpired:
        send_signal(proc.pid, signal.SIGKILL, group=True)
        proc.wait()
    return proc.returncode


def run_local(processes: int, trainer_args: Sequence[str], *, env: Mapping[str, str] | None = None,
              on_line: Callable[[LogLine], None] | None = None, grace: float = 10.0,
              cwd: str | None = None, python: str = sys.executable,
              program: Sequence[str] | None = None) -> int:
    """Run the ranks to completion, calling ``on_line`` for every line; returns the exit status.

    Ctrl-C (KeyboardInterrupt) stops every rank (see :func:`stop`), exit status 130.
    """
    on_line = on_line or (lambda line: print(line.tagged(), flush=True))
    proc = start_local(processes, trainer_args, env=env if env is not None else launch_env(), cwd=cwd,
                       python=python, program=program)
    out = proc.stdout
    assert out is not None
    interrupted = False
    try:
        for line in iter_output(out):
            on_line(line)
        proc.wait()
    except KeyboardInterrupt:
        interrupted = True
        # the reader thread keeps draining so ranks never block on a full pipe while stopping
        threading.Thread(target=lambda: [None for _ in out], daemon=True).start()
        stop(proc, grace=grace)
    finally:
        if proc.poll() is None:
            stop(proc, grace=grace)
    return 130 if interrupted else int(proc.returncode)
