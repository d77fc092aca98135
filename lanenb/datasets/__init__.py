"""Getting the data, notebook side: ``fetch_dataset`` (the trainer package's fetcher, which the
cluster Job runs in the trainer image) and, in :mod:`.k8s_fetch`, the same as a Kubernetes Job
that fills a PVC."""

from lanenb_trainer.datasets import *  # noqa: F403
from lanenb_trainer.datasets import __all__  # noqa: F401
