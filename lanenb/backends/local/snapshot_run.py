"""Linking runs and snapshots: what ``--snapshot`` does when a local run ends successfully.

The job's supervisor (``lanenb.backends.local.supervise``, detached from the kernel) calls
``snapshot_run`` after the ranks exited 0 and before it writes ``exit.json``, so a job that
reads as succeeded already has its snapshots recorded. The run dir (model, logs, metrics,
config) and the dataset directory are snapshotted, labelled with the job, its headline
accuracy and the code version, and recorded in the job registry (``Job.snapshots()``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lanenb.snapshots.base import Snapshot, check_labels
from lanenb.version import __version__
from lanenb_trainer.k8s_snapshot import label_value

__all__ = ["run_labels", "snapshot_run"]


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


def snapshot_run(job: str, volumes: dict[str, str], *, run_dir: str | Path | None = None,
                 registry: Any = None, say: Callable[[str], None] = print) -> list[Snapshot]:
    """Snapshot each ``role -> directory`` of ``volumes`` in the local store and record the links.

    Returns the snapshots made; an error stops at the failing volume and is raised (the
    supervisor reports it in the job log; the run itself stays succeeded).
    """
    from lanenb.registry.jobs import JobRegistry
    from lanenb.snapshots import get_store

    store = get_store("local")
    registry = registry or JobRegistry()
    made = []
    for role, volume in volumes.items():
        snap = store.create(volume, run_labels(job, role, run_dir), name=None)
        registry.add_snapshot(job, store.name, snap.id, role, snap.volume)
        say(f"snapshot {snap.id} of {role} {snap.volume} ({snap.size} bytes)")
        made.append(snap)
    return made
