"""The fast tier's definition, in one place: which tests start processes or servers.

``tests/conftest.py`` marks every such test ``process`` at collection; ``scripts/test-fast.sh`` runs
``-m "not process"`` (FAST_EXPRESSION) and ``tests/docs/test_fast_tier.py`` checks the selection.
A test is marked when it

- asks for a fixture of PROCESS_FIXTURES (directly or through another fixture: pytest's closure,
  ``item.fixturenames``, names them all), or
- already carries one of SLOW_MARKERS (those are multi-process training runs by definition), or
- lives under a path of PROCESS_PATHS (a folder or a module): its tests start ``lanenb``,
  ``mpirun`` or a browser in the test body, where no fixture name tells.

Measured on 2 cores (``--durations``): what is left takes well under a second a test.
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
    # the Kubernetes emulator with the fake operator (its launchers run real mpirun ranks)
    "cluster", "bare_cluster", "csi_cluster",
    # simulated hosts (network namespaces, sshd)
    "machine", "synth_volume",
    # the documentation site built with mkdocs (~16 s)
    "site",
    # restic repositories (every snapshot is a restic process or several)
    "empty_restic_store", "restic_installed", "store",
})

# Folders and modules whose tests start processes in the test body (subprocess.run of `lanenb ...`,
# mpirun, JupyterLab + Chromium): no fixture names them, so they are listed here. Keep this short: a
# new test that starts processes should ask for a fixture of the list above instead.
PROCESS_PATHS = (
    "tests/browser/",  # every test starts JupyterLab and drives it in Chromium (10-70 s each)
)


def starts_processes(nodeid: str, fixturenames: list[str] | tuple[str, ...], markers: set[str]) -> bool:
    """Whether the test ``nodeid`` (with its fixture closure and marker names) starts processes."""
    return bool(SLOW_MARKERS & markers) or not PROCESS_FIXTURES.isdisjoint(fixturenames) \
        or nodeid.startswith(PROCESS_PATHS)
