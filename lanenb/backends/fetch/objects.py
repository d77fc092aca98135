"""``lanenb data fetch --cluster``: the fetch as a Kubernetes Job that fills a PVC.

The RUN:AI guide's first step (``runai submit --name download-tusimple-data --pvc
azurenetappfiles:100Gi:/mnt``) in lanenb terms: a PVC of a given storage class and size
(ReadWriteMany, so every training worker can mount it) is created, or an existing one used,
and a ``batch/v1`` Job runs the trainer image's fetcher into it::

    python -m lanenb_trainer.datasets.fetch tusimple --to /mnt/tusimple --downloads /mnt/.lanenb-downloads \
        --progress-every 5

Archives download onto the PVC, so a pod restarted by the Job (``backoffLimit``) resumes the
partial download. The PVC then shows up in ``Backend.datasets()`` (the ``TrainPanel`` picker)
and trains with ``%lanetrain --pvc <pvc>:/mnt --dataset /mnt/tusimple``.

The Job is a lanenb job: ``lanenb.datasets.cluster.submit_fetch_job`` records it in the job
registry and the ``kubernetes-fetch`` backend (``backend.py``) answers for it, so ``get_job``,
``%lanejobs`` and ``lanenb jobs logs/wait/cancel`` work on it as on a training run. This
module holds the manifests and their creation; every API call goes through
:class:`~lanenb.kube.client.Clients.call` (retries, clear errors).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from kubernetes.client.exceptions import ApiException

from lanenb.backends.fetch.spec import STORAGE_QUANTITY, FetchSpec, fetch_job_name
from lanenb.backends.kubernetes import restricted
from lanenb.contract.redact import secret_parts
from lanenb.errors import UserError
from lanenb.kube.client import Clients, KubernetesAPIError, load_clients
from lanenb.kube.names import check_label, check_subdomain

__all__ = [
    "CONTAINER",
    "DATASET_LABEL",
    "FETCH_ENTRYPOINT",
    "PVC_LABEL",
    "FetchJobError",
    "FetchSpec",
    "build_fetch_job",
    "build_fetch_pvc",
    "build_urls_secret",
    "create_fetch_objects",
    "urls_secret_name",
    "dataset_pvcs",
    "fetch_job_name",
]

FETCH_ENTRYPOINT = ["python", "-m", "lanenb_trainer.datasets.fetch"]  # in the trainer image
CONTAINER = "fetch"
DATASET_LABEL = "lanenb.io/dataset"
PVC_LABEL = "lanenb.io/pvc"  # on the Job: one running fetch per claim
MANAGED = {"app.kubernetes.io/managed-by": "lanenb", "app.kubernetes.io/name": "lanenb-fetch"}


URLS_ENV = "LANENB_FETCH_URLS"  # lanenb_trainer.datasets.fetch reads these (one value per line)
MIRRORS_ENV = "LANENB_FETCH_MIRRORS"


def urls_secret_name(spec: FetchSpec) -> str:
    """The Secret of the fetch's URLs: ``<job>-lanenb-urls``."""
    return check_subdomain("URLs Secret name", f"{spec.name}-lanenb-urls")


def _hidden(spec: FetchSpec) -> dict[str, list[str]]:
    """What travels in the Secret: every ``--url`` (a presigned or SAS URL is a credential, and
    one not recognised by its shape is still someone's signed link) and any mirror holding a
    credential by shape (``https://user:PASS@host``); plain mirrors stay visible in the command."""
    return {"urls": list(spec.urls), "mirrors": [m for m in spec.mirrors if secret_parts(m)]}


class FetchJobError(UserError, RuntimeError):
    """The fetch Job failed or cannot be created; the message says why (the fetcher's error line included)."""


def build_fetch_pvc(pvc: str, *, size: str, storage_class: str | None, dataset: str,
                    access_modes: Sequence[str] = ("ReadWriteMany",)) -> dict[str, Any]:
    """The PVC manifest (``storage_class=None``: the cluster's default class)."""
    check_subdomain("pvc", pvc)
    if not isinstance(size, str) or not STORAGE_QUANTITY.match(size):
        raise FetchJobError(f"size={size!r}: expected a Kubernetes quantity such as 100Gi")
    spec: dict[str, Any] = {"accessModes": list(access_modes), "resources": {"requests": {"storage": size}}}
    if storage_class:
        spec["storageClassName"] = check_subdomain("storage class", storage_class)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc, "labels": {**MANAGED, DATASET_LABEL: dataset}}, "spec": spec}


def build_fetch_job(spec: FetchSpec, *, openshift: bool | None = None) -> dict[str, Any]:
    """The ``batch/v1`` Job manifest that fetches ``spec.dataset`` into ``spec.dataset_path`` on ``spec.pvc``.

    The fetcher writes a plain progress line every ``spec.progress_every`` seconds (bytes, rate,
    ETA) instead of tqdm bars, so the pod log (``Job.logs()``, the live view) shows how far it is.
    ``openshift`` (default ``spec.openshift``, None counting as off): the restricted pod of
    :mod:`~lanenb.backends.kubernetes.restricted`, as OpenShift-mode training pods.
    """
    if openshift is None:
        openshift = bool(spec.openshift)
    args = [spec.dataset, "--to", spec.dataset_path, "--downloads", spec.downloads_path,
            "--progress-every", f"{spec.progress_every:g}"]
    if spec.parts:
        args += ["--parts", *spec.parts]
    hidden = _hidden(spec)
    for m in spec.mirrors:
        if m not in hidden["mirrors"]:
            args += ["--mirror", m]
    if not spec.default_urls:
        args.append("--no-default-urls")
    assert spec.name is not None  # set by FetchSpec
    labels = {**MANAGED, DATASET_LABEL: spec.dataset, "app.kubernetes.io/instance": spec.name}
    container: dict[str, Any] = {
        "name": CONTAINER, "image": spec.image, "imagePullPolicy": spec.image_pull_policy,
        "command": FETCH_ENTRYPOINT + args,
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}] + [
            {"name": var, "valueFrom": {"secretKeyRef": {"name": urls_secret_name(spec), "key": key}}}
            for var, key in ((URLS_ENV, "urls"), (MIRRORS_ENV, "mirrors")) if hidden[key]],
        "volumeMounts": [{"name": "data", "mountPath": spec.mount_path}],
    }
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": spec.pvc}}],
    }
    if openshift:  # an arbitrary non-root UID: nothing of the image is writable but HOME's emptyDir
        pod["securityContext"] = restricted.pod_security_context()
        container["securityContext"] = restricted.container_security_context()
        container["env"].append({"name": "HOME", "value": restricted.HOME})
        container["volumeMounts"].append(restricted.home_mount())
        pod["volumes"].append(restricted.home_volume())
    job_spec: dict[str, Any] = {
        "backoffLimit": spec.backoff_limit,
        "template": {"metadata": {"labels": labels}, "spec": pod},
    }
    if spec.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": spec.name, "labels": {**labels, PVC_LABEL: spec.pvc}}, "spec": job_spec}


def build_urls_secret(spec: FetchSpec, owner: dict[str, Any]) -> dict[str, Any] | None:
    """The ``v1`` Secret of the fetch's URLs (``_hidden``), owned by the Job ``owner`` (its
    created form: name and uid), so it goes when the Job is deleted; None when there are none."""
    hidden = {k: v for k, v in _hidden(spec).items() if v}
    if not hidden:
        return None
    meta = owner.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": urls_secret_name(spec), "labels": {**MANAGED},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta.get("name"),
                                              "uid": meta.get("uid"), "blockOwnerDeletion": False}]},
            "data": {k: base64.b64encode("\n".join(v).encode()).decode() for k, v in hidden.items()}}


def _finished(job: dict[str, Any]) -> bool:
    conds = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conds)


def create_fetch_objects(spec: FetchSpec, clients: Clients, namespace: str) -> dict[str, Any]:
    """Create (or reuse) the PVC and create the Job; returns the created Job (raw dict).

    Raises:
        FetchJobError: missing PVC with ``create_pvc=False``, another fetch Job still running
            into the same PVC, a Job of that name exists, or no such namespace.
        KubernetesError: the cluster is unreachable or refuses the request.
    """
    check_label("namespace", namespace)
    openshift = spec.openshift
    if openshift is None:  # as training decides: the API server's groups say OpenShift or not
        from lanenb.kube.discovery import is_openshift

        openshift = is_openshift(clients)
    job = build_fetch_job(spec, openshift=openshift)
    claim = build_fetch_pvc(spec.pvc, size=spec.size, storage_class=spec.storage_class, dataset=spec.dataset)
    core, batch = clients.core, clients.batch
    try:
        clients.raw(core.read_namespaced_persistent_volume_claim, spec.pvc, namespace,
                    what=f"reading PVC {spec.pvc}")
    except ApiException as exc:
        if exc.status != 404:
            raise KubernetesAPIError(f"reading PVC {spec.pvc} in {namespace}: {exc.status} {exc.reason}",
                                     exc.status, exc.body) from exc
        if not spec.create_pvc:
            raise FetchJobError(f"pvc={spec.pvc!r} does not exist in namespace {namespace!r} "
                                f"(create_pvc=False)") from None
        clients.raw(core.create_namespaced_persistent_volume_claim, namespace, claim,
                    what=f"creating PVC {spec.pvc}")
    selector = ",".join(f"{k}={v}" for k, v in {**MANAGED, PVC_LABEL: spec.pvc}.items())
    resp = clients.raw(batch.list_namespaced_job, namespace, label_selector=selector,
                       what="listing fetch Jobs")
    busy = [j["metadata"]["name"] for j in json.loads(resp.data).get("items") or []
            if not _finished(j) and not j["metadata"].get("deletionTimestamp")]
    if busy:
        raise FetchJobError(f"fetch Job {busy[0]!r} is still filling pvc={spec.pvc!r} in {namespace!r}: wait for it "
                            f"(lanenb jobs wait {busy[0]}) or cancel it (lanenb jobs cancel {busy[0]})")
    name = job["metadata"]["name"]
    try:
        resp = clients.raw(batch.create_namespaced_job, namespace, job, what=f"creating Job {name}")
    except ApiException as exc:
        if exc.status == 409:
            raise FetchJobError(f"a Job {name!r} exists already in {namespace!r}: pick another name") from None
        if exc.status == 404:
            raise FetchJobError(f"the cluster at {clients.where()} does not serve batch/v1 Jobs in "
                                f"namespace {namespace!r} (missing namespace?)") from None
        raise KubernetesAPIError(f"creating Job {name}: {exc.status} {exc.reason}", exc.status, exc.body) from exc
    created = json.loads(resp.data)
    secret = build_urls_secret(spec, created)
    if secret is not None:  # after the Job (its uid owns it); the pod waits for it as for any Secret
        try:
            clients.raw(core.create_namespaced_secret, namespace, secret,
                        what=f"creating Secret {urls_secret_name(spec)}")
        except (ApiException, KubernetesAPIError) as exc:
            try:
                clients.raw(batch.delete_namespaced_job, name, namespace, propagation_policy="Background",
                            what=f"deleting Job {name}")
            except (ApiException, KubernetesAPIError):
                pass  # the error below is the one to see
            raise FetchJobError(f"cannot create Secret {urls_secret_name(spec)!r} for the fetch's URLs in "
                                f"{namespace!r} ({getattr(exc, 'status', '')} {getattr(exc, 'reason', exc)}); "
                                f"the Job was deleted again") from None
    return created


def dataset_pvcs(namespace: str = "default", *, clients: Clients | None = None, context: str | None = None,
                 kubeconfig: str | None = None) -> list[dict[str, Any]]:
    """PVCs of the namespace with the dataset a fetch Job put there (``None`` for others)."""
    clients = clients or load_clients(context, kubeconfig)
    resp = clients.raw(clients.core.list_namespaced_persistent_volume_claim, check_label("namespace", namespace),
                       what="listing PVCs")
    out = []
    for p in json.loads(resp.data).get("items") or []:
        spec = p.get("spec") or {}
        out.append({"name": p["metadata"]["name"], "dataset": (p["metadata"].get("labels") or {}).get(DATASET_LABEL),
                    "storage_class": spec.get("storageClassName"),
                    "size": ((spec.get("resources") or {}).get("requests") or {}).get("storage"),
                    "access_modes": spec.get("accessModes") or [], "phase": (p.get("status") or {}).get("phase")})
    return sorted(out, key=lambda d: d["name"])
