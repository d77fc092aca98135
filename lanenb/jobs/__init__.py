"""One Job API over every backend (local mpirun, Kubernetes MPIJob).

```python
from lanenb.jobs import TrainSpec, submit, get_job
job = submit(TrainSpec(dataset="data/tusimple", processes=2, epochs=1))
for line in job.logs(follow=True): print(line)
```
"""

from __future__ import annotations

from lanenb.backends import AzureMLOptions, KubernetesOptions
from lanenb.contract.backend import Backend, JobStateError, LogLine, RunDirGoneError
from lanenb.contract.backends import (
    BackendError,
    available_backends,
    get_backend,
    get_descriptor,
    register_backend,
    register_descriptor,
    unregister_backend,
)
from lanenb.contract.descriptor import BackendDescriptor, Capabilities
from lanenb.contract.spec import SpecError, TrainSpec, VolumeMount
from lanenb.contract.status import JobState, JobStatus
from lanenb.contract.validate import Problem, validate
from lanenb.home import lanenb_home
from lanenb.jobs.job import Job, default_run_dir, get_job, list_jobs, submit
from lanenb.jobs.updates import Update, UpdateBatch
from lanenb.registry.jobs import JobExistsError, JobNotFoundError, JobRegistry

__all__ = [
    "TrainSpec", "VolumeMount", "KubernetesOptions", "AzureMLOptions", "SpecError",
    "JobState", "JobStatus", "Job", "submit", "get_job", "list_jobs", "default_run_dir",
    "JobRegistry", "JobExistsError", "JobNotFoundError", "lanenb_home",
    "Update", "UpdateBatch", "Problem", "validate",
    "Backend", "BackendError", "RunDirGoneError", "JobStateError", "LogLine",
    "register_backend", "get_backend", "available_backends",
    "BackendDescriptor", "Capabilities", "register_descriptor", "unregister_backend", "get_descriptor",
]
