"""Where a run's TensorBoard files are, so a notebook can say ``%tensorboard --logdir {dir}``.

The ranks write them under ``<run dir>/tensorboard/`` (``lanenb_trainer.tensorboard_log``): on
this machine for a local job, on the job's volume (PVC) for a Kubernetes job, where the path is
the one inside the pods. The notebook server sees it there when it mounts the same PVC at the
same path (the usual Kubeflow / RUN:AI notebook set-up); docs/guide/trackers.md says
what to do otherwise.
"""

from __future__ import annotations

from pathlib import Path

from lanenb.errors import UserError
from lanenb.jobs import Job
from lanenb.trackers.jobref import job_of

__all__ = ["tensorboard_dir"]


def tensorboard_dir(run: Job | str) -> Path:
    """The TensorBoard log dir of a job: pass it to ``%tensorboard --logdir``.

    Args:
        run: a ``Job`` or a job name.

    Returns:
        ``<run dir>/tensorboard`` (``job.tensorboard_dir``): a local path for a local job, the path
        inside the cluster (on the job's PVC) for a Kubernetes job. It may not exist yet while
        the job starts, and never does for a run with ``--no-tensorboard``.

    Raises:
        JobNotFoundError: no job of that name.
        UserError: the job has no run dir (a dataset fetch job).
    """
    job = job_of(run)
    found = job.tensorboard_dir
    if found is None:
        raise UserError(f"job {job.name!r} has no run dir, so no TensorBoard files "
                        f"(a {job.backend_name} job, not a training run)")
    return Path(found)
