"""One Job API over every backend (local mpirun, Kubernetes MPIJob).

    from lanenb.jobs import TrainSpec, submit, get_job
    job = submit(TrainSpec(dataset="data/tusimple", processes=2, epochs=1))
    for line in job.logs(follow=True): print(line)
"""

from __future__ import annotations

from .backends import Backend, BackendError, LogLine, available_backends, get_backend, register_backend
from .job import Job, default_run_dir, get_job, list_jobs, submit
from .registry import JobExistsError, JobNotFoundError, JobRegistry, lanenb_home
from .spec import KubernetesOptions, SpecError, TrainSpec, VolumeMount
from .status import JobState, JobStatus
from .runstate import RunState
from .updates import Update, UpdateBatch
from .validate import Problem, validate

__all__ = [
    "TrainSpec", "VolumeMount", "KubernetesOptions", "SpecError",
    "JobState", "JobStatus", "Job", "submit", "get_job", "list_jobs", "default_run_dir",
    "JobRegistry", "JobExistsError", "JobNotFoundError", "lanenb_home",
    "RunState", "Update", "UpdateBatch", "Problem", "validate",
    "Backend", "BackendError", "LogLine", "register_backend", "get_backend", "available_backends",
]
