"""Snapshot the data/model PVC from inside the cluster when training ends (``ENABLE_SNAPSHOT``).

Why here and not in the notebook: the RUN:AI guide's versioning step must happen even when the
kernel that submitted the job is gone, so rank 0 creates the CSI ``VolumeSnapshot`` itself with
the pod's service-account credentials (RBAC: ``deploy/rbac-trainer.yaml``). Plain HTTPS through
``urllib`` (the trainer image needs no ``kubernetes`` package, and the trainer never imports
the notebook side). The object carries the labels ``lanenb.snapshots.csi`` writes, so
``lanenb.snapshots.list(labels={"job": ...}, backend="kubernetes")`` and ``Job.snapshots()``
find it. No ``volumeSnapshotClassName``: the snapshot controller uses the default class of the
PVC's driver (and the service account needs no StorageClass rights).

In-cluster credentials, as the kubernetes client's ``load_incluster_config`` reads them:
``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT`` (default ``kubernetes.default.svc:443``),
and ``token``, ``ca.crt``, ``namespace`` under ``/var/run/secrets/kubernetes.io/serviceaccount``.
Two documented overrides, for tests and unusual pods: ``LANENB_SERVICEACCOUNT_DIR`` (that
directory) and ``LANENB_KUBE_API_URL`` (the API server's URL; the only way to use plain HTTP).
The token is sent as a header and never printed or logged.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SA_DIR", "SnapshotResult", "create_pvc_snapshot", "label_value", "snapshot_name"]

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
GROUP_VERSION = "snapshot.storage.k8s.io/v1"
LABEL_PREFIX = "lanenb.io/"  # lanenb.snapshots.csi imports it: one prefix for both sides
MANAGED_BY = {"app.kubernetes.io/managed-by": "lanenb"}
# a Kubernetes label value (lanenb.snapshots.base checks snapshot labels with it too)
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class SnapshotResult:
    """What the ``snapshot`` event reports: ``status`` is ``created`` or ``failed``."""

    status: str
    name: str | None
    namespace: str | None
    ready: bool = False
    error: str | None = None

    def fields(self) -> dict[str, Any]:
        return {"status": self.status, "snapshot": self.name, "namespace": self.namespace, "ready": self.ready,
                "error": self.error}


def slug(text: str, limit: int = 40, empty: str = "volume") -> str:
    """``text`` as the start of a snapshot name (lower case, '-' for anything else); ``empty``
    when nothing is left. ``lanenb.snapshots`` names its snapshots with it too."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return out or empty


def snapshot_name(job: str) -> str:
    """``<job>-<UTC time>-<6 hex>``: an RFC 1123 name, unique without asking the API server."""
    return f"{slug(job, 38, empty='run')}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


def label_value(value: object) -> str:
    """``value`` as a Kubernetes label value: characters a label cannot hold become ``_``
    (a PEP 440 local version ``0.2+g1a2b`` -> ``0.2_g1a2b``), at most 63, alphanumeric at both
    ends; may be empty. Both snapshot stores label with it, so no version string fails a snapshot."""
    return re.sub(r"[^-A-Za-z0-9_.]", "_", str(value))[:63].strip("-_.")


class _Api:
    """The API server as the pod's service account sees it."""

    def __init__(self, sa_dir: str | None = None, url: str | None = None) -> None:
        sa = Path(sa_dir or os.environ.get("LANENB_SERVICEACCOUNT_DIR") or SA_DIR)
        try:
            self._token = (sa / "token").read_text().strip()
        except OSError as exc:
            raise RuntimeError(f"no service-account token at {sa / 'token'} ({exc.strerror}): run the job with "
                               "k8s={'service_account': 'lanenb-trainer'} (deploy/rbac-trainer.yaml)") from None
        try:
            self.namespace = (sa / "namespace").read_text().strip()
        except OSError:
            self.namespace = "default"
        if url is None:
            url = os.environ.get("LANENB_KUBE_API_URL")
        if url is None:
            host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
            port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
            url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        self.url = url.rstrip("/")
        self._context = None
        if self.url.startswith("https://"):
            ca = sa / "ca.crt"
            self._context = ssl.create_default_context(cafile=str(ca) if ca.exists() else None)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 15.0) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self._token}", "Accept": "application/json",
            **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._context) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("message") or exc.reason
            except ValueError:
                message = exc.reason
            hint = (" (the pod's service account may not create VolumeSnapshots: apply deploy/rbac-trainer.yaml and "
                    "run with k8s={'service_account': 'lanenb-trainer'})") if exc.code in (401, 403) else ""
            raise RuntimeError(f"{method} {path}: {exc.code} {message}{hint}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise RuntimeError(f"the API server at {self.url} cannot be reached: {exc}") from None


def create_pvc_snapshot(pvc: str, job: str, *, labels: dict[str, Any] | None = None, wait: float = 30.0,
                        poll: float = 0.5, sa_dir: str | None = None, api_url: str | None = None) -> SnapshotResult:
    """Create a ``VolumeSnapshot`` of ``pvc`` labelled with ``job`` and wait up to ``wait`` s for
    ``readyToUse`` (the cut is what matters: a snapshot still uploading is reported
    ``created`` with ``ready=False``). Never raises: the run succeeded either way, so a
    failure (no credentials, RBAC refusal, ``status.error``) comes back as ``failed`` + words.
    """
    name = snapshot_name(job)
    namespace, created = None, False
    try:
        api = _Api(sa_dir, api_url)
        namespace = api.namespace
        extra = {f"{LABEL_PREFIX}{k}": v for k, v in ((k, label_value(v)) for k, v in (labels or {}).items()) if v}
        body = {"apiVersion": GROUP_VERSION, "kind": "VolumeSnapshot",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {**MANAGED_BY, f"{LABEL_PREFIX}job": label_value(job) or "unknown", **extra}},
                "spec": {"source": {"persistentVolumeClaimName": pvc}}}
        base = f"/apis/{GROUP_VERSION}/namespaces/{namespace}/volumesnapshots"
        api.call("POST", base, body)
        created = True
        deadline = time.monotonic() + wait
        while True:
            status = api.call("GET", f"{base}/{name}").get("status") or {}
            if (status.get("error") or {}).get("message"):
                return SnapshotResult("failed", name, namespace, error=status["error"]["message"])
            if status.get("readyToUse") or time.monotonic() >= deadline:
                return SnapshotResult("created", name, namespace, ready=bool(status.get("readyToUse")))
            time.sleep(poll)
    except RuntimeError as exc:
        return SnapshotResult("failed", name if created else None, namespace, error=str(exc))
