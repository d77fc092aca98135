"""Launching trainer ranks. ``mpirun`` locally; the job layer reuses the same argv builder."""

from lanenb.launch.mpirun import (
    OutputLine,
    TaggedOutputParser,
    build_mpirun_argv,
    find_mpirun,
    free_port,
    iter_output,
    launch_env,
    run_local,
    start_local,
    stop,
    trainer_argv,
)

__all__ = [
    "OutputLine", "TaggedOutputParser", "build_mpirun_argv", "find_mpirun", "free_port", "iter_output",
    "launch_env", "run_local", "start_local", "stop", "trainer_argv",
]
