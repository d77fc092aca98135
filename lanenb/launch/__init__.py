"""Launching trainer ranks. ``mpirun`` locally; the job layer reuses the same argv builder.

``lines`` is the one line type (``LogLine``) and mpirun-output reader, ``procs`` the one
TERM-then-KILL stop sequence, ``rankguard`` what each local rank runs behind."""

from lanenb.launch.lines import LogLine, TaggedOutputParser, iter_output
from lanenb.launch.mpirun import (
    build_mpirun_argv,
    find_mpirun,
    free_port,
    launch_env,
    run_local,
    start_local,
    stop,
    trainer_argv,
)

__all__ = [
    "LogLine", "TaggedOutputParser", "build_mpirun_argv", "find_mpirun", "free_port", "iter_output",
    "launch_env", "run_local", "start_local", "stop", "trainer_argv",
]
