"""``lanenb data fetch --cluster``, as a workflow: create (or reuse) a PVC, submit the fetch Job
through the job API and, for ``fetch_to_pvc``, wait until the data lies on the PVC. The Job's
objects are built by ``lanenb.backends.fetch.objects``; the job is watched by the
``kubernetes-fetch`` backend like any lanenb job."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lanenb.backends.fetch.objects import FetchJobError, dataset_pvcs
from lanenb.backends.fetch.spec import FetchSpec
from lanenb.jobs import submit
from lanenb.kube.client import Clients

if TYPE_CHECKING:
    from lanenb.jobs import Job, JobRegistry

__all__ = ["submit_fetch_job", "fetch_to_pvc", "dataset_pvcs", "FetchSpec", "FetchJobError"]


def submit_fetch_job(dataset: str = "tusimple", *, pvc: str, image: str, kubeconfig: str | None = None,
                     registry: JobRegistry | None = None, clients: Clients | None = None,
                     **fields: Any) -> Job:
    """Create (or reuse) the PVC, submit the fetch Job and record it as a lanenb job.

    Args:
        dataset: ``tusimple`` or ``culane``.
        pvc: the claim to fill; created with ``size``/``storage_class`` unless it exists.
        image: the trainer image (it carries ``lanenb_trainer.datasets.fetch``).
        kubeconfig: kubeconfig file (default: kubectl's); the context is ``context=``.
        fields: the other :class:`FetchSpec` fields (``namespace``, ``size``, ``storage_class``,
            ``create_pvc``, ``parts``, ``mirrors``, ``urls``, ``default_urls``, ``name``, ...).

    Returns:
        Job: ``status()``, ``logs(follow=True)``, ``wait()``, ``cancel()``, as for training;
        ``job.handle["dataset_path"]`` is where the data lies on the PVC.

    Raises:
        SpecError / UnknownDatasetError: a bad value (no request is sent).
        FetchJobError: missing PVC with ``create_pvc=False``, or a fetch into it still running.
        KubernetesError: the cluster is unreachable or refuses the request.
    """
    spec = FetchSpec(dataset=dataset, pvc=pvc, image=image, **fields)
    opts: dict[str, Any] = {"kubeconfig": kubeconfig}
    if clients is not None:
        opts["clients"] = clients
    # submit runs any spec its backend takes (documented); its annotation names the training spec only
    return submit(spec, registry=registry, **opts)  # type: ignore[arg-type]


def fetch_to_pvc(dataset: str = "tusimple", *, pvc: str, image: str, timeout: float | None = None,
                 poll: float = 1.0, **kwargs: Any) -> Job:
    """:func:`submit_fetch_job`, then wait until the data is on the PVC.

    Returns:
        Job: the succeeded fetch job.

    Raises:
        FetchJobError: the fetch failed (the message carries the fetcher's error line), was
            cancelled, or its Job vanished.
        TimeoutError: still running after ``timeout`` seconds (it keeps running).
    """
    job = submit_fetch_job(dataset, pvc=pvc, image=image, **kwargs)
    status = job.wait(timeout=timeout, poll=poll)
    if status.state.value != "succeeded":
        raise FetchJobError(f"fetch job {job.name} {status}")
    return job
