"""The trackers people already use, for lanenb runs: TensorBoard and MLflow.

    import lanenb.trackers
    %tensorboard --logdir {lanenb.trackers.tensorboard_dir(job)}     # or job.tensorboard_dir
    lanenb.trackers.to_mlflow(job, tracking_uri="http://mlflow:5000")  # a finished run: params, metrics, model

The ranks write the TensorBoard files themselves (``lanenb_trainer.tensorboard_log``); this room
finds them and exports finished runs to MLflow. A workflow-level room: it reads jobs
(``lanenb.jobs``) and the headline rule (``lanenb.analysis``).
"""

from __future__ import annotations

from lanenb.trackers.jobref import job_of
from lanenb.trackers.logdir import tensorboard_dir
from lanenb.trackers.mlflow_export import (
    DEFAULT_EXPERIMENT,
    AlreadyExportedError,
    MlflowExport,
    MlflowExportError,
    NotFinishedError,
    to_mlflow,
)
from lanenb.trackers.record import RunRecord, run_record

__all__ = ["tensorboard_dir", "to_mlflow", "MlflowExport", "NotFinishedError", "AlreadyExportedError",
           "MlflowExportError", "DEFAULT_EXPERIMENT", "RunRecord", "run_record", "job_of"]
