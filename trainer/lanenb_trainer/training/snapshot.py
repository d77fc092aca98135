"""``ENABLE_SNAPSHOT``: rank 0 snapshots the data/model PVC after a successful run, as the
RUN:AI guide did, with the pod's service account (``lanenb_trainer.k8s_snapshot``): nothing
depends on the notebook kernel still running."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lanenb_trainer.config import TrainConfig

__all__ = ["snapshot_pvc"]


def snapshot_pvc(cfg: TrainConfig, run_dir: Path, best: dict[str, Any] | None, emit: Callable[..., None]) -> None:
    """Snapshot ``cfg.pvc_name``, labelled with the job, the code version and the accuracy.

    Reports a ``snapshot`` event with ``status`` ``created`` or ``failed``; a failed snapshot
    never fails the run. Call it on rank 0 only, when ``cfg.enable_snapshot``.
    """
    from lanenb_trainer import __version__
    from lanenb_trainer.k8s_snapshot import create_pvc_snapshot

    job = os.environ.get("LANENB_JOB_NAME") or run_dir.name
    labels: dict[str, Any] = {"role": "volume", "code": __version__}
    accuracy = (best or {}).get("accuracy")
    try:
        accuracy = json.loads((run_dir / "metrics.json").read_text()).get("accuracy", accuracy)
    except (OSError, ValueError, AttributeError):
        pass
    if isinstance(accuracy, (int, float)) and not isinstance(accuracy, bool):
        labels["accuracy"] = f"{accuracy:.4f}"
    assert cfg.pvc_name, "TrainConfig.validate: --enable-snapshot needs --pvc-name"
    result = create_pvc_snapshot(cfg.pvc_name, job, labels=labels)
    emit("snapshot", pvc_name=cfg.pvc_name, job=job, run_dir=str(run_dir), **result.fields())
