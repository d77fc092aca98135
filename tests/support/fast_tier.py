"""The fast tier's definition, in one place: which tests start processes or servers.

``tests/conftest.py`` marks every such test ``process`` at collection; ``scripts/test-fast.sh`` runs
``-m "not process"`` (FAST_EXPRESSION) and ``tests/docs/test_fast_tier.py`` checks the selection.
A test is marked when it

- asks for a fixture of PROCESS_FIXTURES (directly or through another fixture: pytest's closure,
  ``item.fixturenames``, names them all), or
- already carries one of SLOW_MARKERS (those are multi-process training runs by definition), or
- lives under a path of PROCESS_PATHS (a folder, a module or a test): it starts ``lanenb``,
  ``mpirun`` or a browser in the test body, or computes for seconds, where no fixture name tells.

Measured on 2 cores (``--durations``): what is left, ~1,400 tests, takes 0.07 s a test on average
(100 s in all); 22 take 1-3.5 s.
"""

from __future__ import annotations

__all__ = ["FAST_EXPRESSION", "PROCESS_FIXTURES", "PROCESS_MARKER", "PROCESS_PATHS", "SLOW_MARKERS",
           "starts_processes"]

PROCESS_MARKER = "process"
FAST_EXPRESSION = f"not {PROCESS_MARKER}"

SLOW_MARKERS = frozenset({"slow", "notebook", "multihost", "horovod"})

PROCESS_FIXTURES = frozenset({
    # a real Jupyter server (pytest-jupyter's ServerApp; jp_fetch and friends ask for it)
    "jp_serverapp",
    # mpirun jobs: the tiny rank program, a scripted replay, or real training runs
    "mpirun", "rank_program", "tiny_job", "scripted", "trained", "finished_job", "full_run", "timed_run",
    "doctor_data", "working_job", "run_job", "restart_job", "synth_data", "sweep_data",
    # the trainer tests' synthetic dataset: the tests that ask for it run trainer ranks on it
    "synth_root",
    # the Kubernetes emulator with the fake operator (its launchers run real mpirun ranks)
    "cluster", "bare_cluster", "csi_cluster", "os_cluster",
    # simulated hosts (network namespaces, sshd)
    "machine", "synth_volume",
    # the documentation site built with mkdocs (~16 s)
    "site",
    # restic repositories (every snapshot is a restic process or several)
    "empty_restic_store", "restic_installed", "store",
})

# Folders, modules and tests (node id prefixes) that start processes in the test body (a `lanenb`
# subprocess, mpirun, a kernel, JupyterLab and Chromium) or compute for seconds, where no fixture
# name tells: each holds tests that took over 2.5 s (`--durations`, 2 cores). Keep this short: a
# new test that starts processes should ask for a fixture of the list above instead.
PROCESS_PATHS = (
    "tests/browser/",  # JupyterLab driven in Chromium (10-70 s a test)
    "tests/data/test_data_loader.py",  # DataLoader worker processes (3 s a test)
    "tests/data/test_data_cli.py::test_synth_then_check_then_preview_as_a_user_would",  # `lanenb` subprocesses
    "tests/evaluation/test_target_roundtrip.py",  # every real TuSimple label through masks and back (15 s)
    "tests/k8s/test_k8s_preemption.py::test_the_pods_sigterm_reaches_every_rank_through_mpirun",  # mpirun ranks
    "tests/k8s/test_team_view_bench.py",  # runs bench/team_view.py
    "tests/models/test_message_passing_bench.py::test_isa_avx2",  # runs the bench in a subprocess
    "tests/models/test_sweep_triton.py",  # Triton's interpreter (1-6 s a test)
    "tests/notebook/test_lanenb_kernel.py",  # starts kernels
    "tests/notebook/test_runstate.py::test_reducer_memory_is_bounded_after_100k_steps",  # 1M lines (13 s)
    "tests/server/test_payload_types.py::test_snapshot_payloads",  # restic init and snapshots
    "tests/support/test_gpu_kit.py::test_session_without_kit",  # runs the GPU check script
    "tests/trainer/test_trainer_wire.py",  # trainer ranks
)


def starts_processes(nodeid: str, fixturenames: list[str] | tuple[str, ...], markers: set[str]) -> bool:
    """Whether the test ``nodeid`` (with its fixture closure and marker names) starts processes."""
    return bool(SLOW_MARKERS & markers) or not PROCESS_FIXTURES.isdisjoint(fixturenames) \
        or nodeid.startswith(PROCESS_PATHS)
