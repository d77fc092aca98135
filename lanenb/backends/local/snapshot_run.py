"""Linking runs and snapshots: what ``--snapshot`` does when a local run ends successfully.

The job's supervisor (``lanenb.backends.local.supervise``, detached from the kernel) calls
``snapshot_run`` after the ranks exited 0 and before it writes ``exit.json``, so a job that
reads as succeeded already has its snapshots recorded. The run dir (model, logs, metrics,
config) and the dataset directory are snapshotted, labelled with the job, its headline
accuracy and the code version, and recorded in the job registry (``Job.snapshots()``).

What a diff of two runs should show is the run (model, metrics, logs, events, config), so the
run dir's snapshot leaves out the supervisor's own files (``INTERNAL``). A dataset folder that
has not changed since its newest dataset snapshot is not snapshotted again: that snapshot is
recorded for this job too and the job log says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lanenb.snapshots.base import Snapshot, SnapshotStore, check_labels
from lanenb.version import __version__
from lanenb_trainer.k8s_snapshot import label_value
from lanenb_trainer.stopping import CANCEL_NAME, SUSPEND_NAME

__all__ = ["INTERNAL", "run_labels", "snapshot_run", "unchanged_dataset_snapshot"]

# The supervisor's bookkeeping in a run dir, left out of its snapshot: rank pids (PIDS_NAME), its
# stderr (opened by LocalBackend.submit), the space kept for exit.json (RESERVE_NAME), the
# cancel/suspend reasons, the log's digest (DIGEST_NAME: an index of job.log, which is kept) and
# exit.json. The supervisor's names are spelled here because it imports this module (importing it
# back would be a cycle); tests/snapshots/test_run_snapshot_contents.py holds them equal.
INTERNAL = ("pids", "supervisor.err", ".exit.reserve", CANCEL_NAME, SUSPEND_NAME, "job.digest", "exit.json")


def run_labels(job: str, role: str, run_dir: str | Path | None = None) -> dict[str, str]:
    """``job``, ``role``, ``code`` (lanenb version, as a label value: a checkout pip never
    installed is ``0+unknown``) and, when the run wrote one, ``accuracy``."""
    labels: dict[str, Any] = {"job": job, "role": role, "code": label_value(__version__)}
    if run_dir is not None:
        try:
            accuracy = json.loads((Path(run_dir) / "metrics.json").read_text()).get("accuracy")
        except (OSError, ValueError, AttributeError):
            accuracy = None
        if isinstance(accuracy, (int, float)) and not isinstance(accuracy, bool):
            labels["accuracy"] = f"{accuracy:.4f}"
    return check_labels(labels)


def unchanged_dataset_snapshot(store: SnapshotStore, volume: str) -> Snapshot | None:
    """The newest dataset snapshot of ``volume`` when the folder has not changed since it, else
    ``None`` (none yet, changed, or the store cannot tell)."""
    found = store.list(volume, {"role": "dataset"})
    if found and store.unchanged_since(volume, found[-1]):
        return found[-1]
    return None


def snapshot_run(job: str, volumes: dict[str, str], *, run_dir: str | Path | None = None,
                 registry: Any = None, say: Callable[[str], None] = print) -> list[Snapshot]:
    """Snapshot each ``role -> directory`` of ``volumes`` in the local store and record the links.

    Returns the snapshots made or reused; an error stops at the failing volume and is raised
    (the supervisor reports it in the job log; the run itself stays succeeded).
    """
    from lanenb.registry.jobs import JobRegistry
    from lanenb.snapshots import get_store

    store = get_store("local")
    registry = registry or JobRegistry()
    made = []
    for role, volume in volumes.items():
        snap = unchanged_dataset_snapshot(store, volume) if role == "dataset" else None
        if snap is not None:
            say(f"{role} unchanged since snapshot {snap.id}: reused")
        else:
            local: dict[str, Any] = {"exclude": INTERNAL} if role == "run" else {}  # ResticStore.create's
            snap = store.create(volume, run_labels(job, role, run_dir), name=None, **local)
            say(f"snapshot {snap.id} of {role} {snap.volume} ({snap.size} bytes)")
        registry.add_snapshot(job, store.name, snap.id, role, snap.volume)
        made.append(snap)
    return made
