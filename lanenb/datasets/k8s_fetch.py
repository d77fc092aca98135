"""``lanenb data fetch --cluster``: the fetch as a Kubernetes Job that fills a PVC.

The RUN:AI guide's first step (``runai submit --name download-tusimple-data --pvc
azurenetappfiles:100Gi:/mnt``) in lanenb terms: a PVC of a given storage class and size
(ReadWriteMany, so every training worker can mount it) is created, or an existing one used,
and a ``batch/v1`` Job runs the trainer image's fetcher into it::

    python -m lanenb_trainer.datasets.fetch tusimple --to /mnt/tusimple --downloads /mnt/.lanenb-downloads

Archives download onto the PVC, so a pod restarted by the Job (``backoffLimit``) resumes the
partial download. The PVC then shows up in ``Backend.datasets()`` (the ``TrainPanel`` picker)
and trains with ``%lanetrain --pvc <pvc>:/mnt --dataset /mnt/tusimple``.

Every API call goes through :class:`~lanenb.jobs.backends.kubernetes.client.Clients.call`
(retries, clear errors); manifests are plain dicts, like the MPIJob builder's.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from lanenb.errors import UserError
from lanenb.jobs.backends.kubernetes.client import Clients, KubernetesAPIError, load_clients
from lanenb.jobs.backends.kubernetes.names import check_label, check_subdomain
from lanenb_trainer.datasets.sources import get_source

__all__ = ["FetchJob", "FetchJobError", "build_fetch_pvc", "build_fetch_job", "fetch_job_name", "submit_fetch_job",
           "fetch_job_status", "wait_fetch_job", "cancel_fetch_job", "dataset_pvcs", "DATASET_LABEL",
           "FETCH_ENTRYPOINT"]

FETCH_ENTRYPOINT = ["python", "-m", "lanenb_trainer.datasets.fetch"]  # in the trainer image
DATASET_LABEL = "lanenb.io/dataset"
MANAGED = {"app.kubernetes.io/managed-by": "lanenb", "app.kubernetes.io/name": "lanenb-fetch"}
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")


class FetchJobError(UserError, RuntimeError):
    """The fetch Job failed or cannot be created; the message says why (pod log tail included)."""


@dataclass(frozen=True)
class FetchJob:
    """Handle of a submitted fetch Job."""

    name: str
    namespace: str
    pvc: str
    dataset_path: str  # where the dataset lies inside a pod that mounts the PVC at mount_path


def fetch_job_name(dataset: str, pvc: str) -> str:
    """``fetch-<dataset>-<pvc>`` cut to a valid label (Job names label their pods)."""
    name = re.sub(r"[^a-z0-9-]", "-", f"fetch-{dataset}-{pvc}".lower())[:63].strip("-")
    return check_label("job name", name)


def build_fetch_pvc(pvc: str, *, size: str, storage_class: str | None, dataset: str,
                    access_modes: Sequence[str] = ("ReadWriteMany",)) -> dict[str, Any]:
    """The PVC manifest (``storage_class=None``: the cluster's default class)."""
    check_subdomain("pvc", pvc)
    if not isinstance(size, str) or not _QUANTITY.match(size):
        raise FetchJobError(f"size={size!r}: expected a Kubernetes quantity such as 100Gi")
    spec: dict[str, Any] = {"accessModes": list(access_modes), "resources": {"requests": {"storage": size}}}
    if storage_class:
        spec["storageClassName"] = check_subdomain("storage class", storage_class)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc, "labels": {**MANAGED, DATASET_LABEL: dataset}}, "spec": spec}


def build_fetch_job(dataset: str, pvc: str, *, image: str, name: str | None = None, mount_path: str = "/mnt",
                    parts: Sequence[str] = (), mirrors: Sequence[str] = (), urls: Sequence[str] = (),
                    default_urls: bool = True, backoff_limit: int = 3, image_pull_policy: str = "IfNotPresent",
                    active_deadline_seconds: int | None = None) -> dict[str, Any]:
    """The ``batch/v1`` Job manifest that fetches ``dataset`` into ``<mount_path>/<dataset>`` on ``pvc``."""
    source = get_source(dataset)
    for p in parts:
        source.select([p])  # names the bad part
    check_subdomain("pvc", pvc)
    name = check_label("job name", name) if name else fetch_job_name(source.name, pvc)
    if not image or any(c.isspace() for c in image):
        raise FetchJobError(f"image={image!r}: the trainer image (e.g. registry/lanenb-trainer:0.1) is required")
    if not mount_path.startswith("/"):
        raise FetchJobError(f"mount_path={mount_path!r}: must be an absolute path")
    root = f"{mount_path.rstrip('/')}/{source.name}"
    args = [source.name, "--to", root, "--downloads", f"{mount_path.rstrip('/')}/.lanenb-downloads", "--quiet"]
    if parts:
        args += ["--parts", *parts]
    for m in mirrors:
        args += ["--mirror", m]
    for u in urls:
        args += ["--url", u]
    if not default_urls:
        args.append("--no-default-urls")
    labels = {**MANAGED, DATASET_LABEL: source.name, "app.kubernetes.io/instance": name}
    spec: dict[str, Any] = {
        "backoffLimit": int(backoff_limit),
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "fetch", "image": image, "imagePullPolicy": image_pull_policy,
                    "command": FETCH_ENTRYPOINT + args,
                    "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
                    "volumeMounts": [{"name": "data", "mountPath": mount_path}],
                }],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}],
            },
        },
    }
    if active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = int(active_deadline_seconds)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels}, "spec": spec}


def _batch(clients: Clients) -> k8s.BatchV1Api:
    return k8s.BatchV1Api(clients.api)


def submit_fetch_job(dataset: str = "tusimple", *, pvc: str, image: str, namespace: str = "default",
                     size: str = "100Gi", storage_class: str | None = None, create_pvc: bool = True,
                     context: str | None = None, kubeconfig: str | None = None, clients: Clients | None = None,
                     **job_kwargs: Any) -> FetchJob:
    """Create (or reuse) the PVC and submit the fetch Job.

    Args:
        dataset: ``tusimple`` or ``culane``.
        pvc: the claim to fill; created with ``size``/``storage_class`` unless it exists.
        image: the trainer image (it carries ``lanenb_trainer.datasets.fetch``).
        create_pvc: ``False``: the PVC must exist already.
        job_kwargs: ``parts``, ``mirrors``, ``urls``, ``default_urls``, ``mount_path``, ... of
            :func:`build_fetch_job`.

    Raises:
        FetchJobError: bad value, missing PVC with ``create_pvc=False``, or the Job exists already.
        KubernetesError: the cluster is unreachable or refuses the request.
    """
    check_label("namespace", namespace)
    job = build_fetch_job(dataset, pvc, image=image, **job_kwargs)
    claim = build_fetch_pvc(pvc, size=size, storage_class=storage_class, dataset=get_source(dataset).name)
    clients = clients or load_clients(context, kubeconfig)
    core = clients.core
    try:
        clients.call(core.read_namespaced_persistent_volume_claim, pvc, namespace, what=f"reading PVC {pvc}",
                     _preload_content=False)
    except ApiException as exc:
        if exc.status != 404:
            raise KubernetesAPIError(f"reading PVC {pvc} in {namespace}: {exc.status} {exc.reason}",
                                     exc.status, exc.body) from exc
        if not create_pvc:
            raise FetchJobError(f"pvc={pvc!r} does not exist in namespace {namespace!r} (create_pvc=False)") from None
        clients.call(core.create_namespaced_persistent_volume_claim, namespace, claim, what=f"creating PVC {pvc}",
                     _preload_content=False)
    name = job["metadata"]["name"]
    try:
        clients.call(_batch(clients).create_namespaced_job, namespace, job, what=f"creating Job {name}",
                     _preload_content=False)
    except ApiException as exc:
        if exc.status == 409:
            raise FetchJobError(f"a Job {name!r} exists already in {namespace!r}: wait for it, or delete it "
                                f"(cancel_fetch_job) to fetch again") from None
        if exc.status == 404:
            raise FetchJobError(f"the cluster at {clients.where()} does not serve batch/v1 Jobs in "
                                f"namespace {namespace!r} (missing namespace?)") from None
        raise KubernetesAPIError(f"creating Job {name}: {exc.status} {exc.reason}", exc.status, exc.body) from exc
    path = job["spec"]["template"]["spec"]["containers"][0]["command"][len(FETCH_ENTRYPOINT) + 2]
    return FetchJob(name, namespace, pvc, path)


def _read_job(clients: Clients, handle: FetchJob) -> dict[str, Any] | None:
    try:
        resp = clients.call(_batch(clients).read_namespaced_job_status, handle.name, handle.namespace,
                            what=f"reading Job {handle.name}", _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return json.loads(resp.data)


def _log_tail(clients: Clients, handle: FetchJob, lines: int = 20) -> str:
    core = clients.core
    pods = json.loads(clients.call(core.list_namespaced_pod, handle.namespace, label_selector=f"job-name={handle.name}",
                                   what="listing fetch pods", _preload_content=False).data).get("items") or []
    if not pods:
        return ""
    last = sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")[-1]
    try:
        return clients.call(core.read_namespaced_pod_log, last["metadata"]["name"], handle.namespace,
                            tail_lines=lines, what="reading the fetch pod's log")
    except ApiException:
        return ""


def fetch_job_status(handle: FetchJob, *, clients: Clients | None = None, context: str | None = None,
                     kubeconfig: str | None = None) -> str:
    """``Running``, ``Succeeded``, ``Failed: <reason: message>`` or ``Lost`` (the Job is gone)."""
    clients = clients or load_clients(context, kubeconfig)
    job = _read_job(clients, handle)
    if job is None:
        return "Lost"
    conds = {c["type"]: c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
    if "Complete" in conds:
        return "Succeeded"
    if "Failed" in conds:
        c = conds["Failed"]
        return f"Failed: {c.get('reason', '')}: {c.get('message', '')}".rstrip(": ")
    return "Running"


def wait_fetch_job(handle: FetchJob, *, timeout: float = 24 * 3600, poll: float = 2.0, clients: Clients | None = None,
                   context: str | None = None, kubeconfig: str | None = None) -> str:
    """Block until the Job succeeds (returns ``Succeeded``).

    Raises:
        FetchJobError: the Job failed (with the last pod's log tail: the fetcher's one-line
            error), vanished, or did not end within ``timeout`` seconds.
    """
    clients = clients or load_clients(context, kubeconfig)
    deadline = time.monotonic() + timeout
    while True:
        status = fetch_job_status(handle, clients=clients)
        if status == "Succeeded":
            return status
        if status.startswith("Failed") or status == "Lost":
            tail = _log_tail(clients, handle) if status != "Lost" else ""
            last = next((ln for ln in reversed(tail.splitlines()) if "error" in ln.lower()), "")
            what = "is gone (deleted?)" if status == "Lost" else "failed: " + status.partition(": ")[2]
            raise FetchJobError(f"fetch Job {handle.namespace}/{handle.name} {what}"
                                + (f"; pod log: {last.strip()}" if last else ""))
        if time.monotonic() > deadline:
            raise FetchJobError(f"fetch Job {handle.namespace}/{handle.name} still running after {timeout:.0f} s")
        time.sleep(poll)


def cancel_fetch_job(handle: FetchJob, *, clients: Clients | None = None, context: str | None = None,
                     kubeconfig: str | None = None) -> None:
    """Delete the Job and its pods (the PVC and what it holds stay; a new Job resumes)."""
    clients = clients or load_clients(context, kubeconfig)
    try:
        clients.call(_batch(clients).delete_namespaced_job, handle.name, handle.namespace,
                     propagation_policy="Background", what=f"deleting Job {handle.name}", _preload_content=False)
    except ApiException as exc:
        if exc.status != 404:
            raise


def dataset_pvcs(namespace: str = "default", *, clients: Clients | None = None, context: str | None = None,
                 kubeconfig: str | None = None) -> list[dict[str, Any]]:
    """PVCs of the namespace with the dataset a fetch Job put there (``None`` for others)."""
    clients = clients or load_clients(context, kubeconfig)
    resp = clients.call(clients.core.list_namespaced_persistent_volume_claim, check_label("namespace", namespace),
                        what="listing PVCs", _preload_content=False)
    out = []
    for p in json.loads(resp.data).get("items") or []:
        spec = p.get("spec") or {}
        out.append({"name": p["metadata"]["name"], "dataset": (p["metadata"].get("labels") or {}).get(DATASET_LABEL),
                    "storage_class": spec.get("storageClassName"),
                    "size": ((spec.get("resources") or {}).get("requests") or {}).get("storage"),
                    "access_modes": spec.get("accessModes") or [], "phase": (p.get("status") or {}).get("phase")})
    return sorted(out, key=lambda d: d["name"])
