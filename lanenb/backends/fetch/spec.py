"""``FetchSpec``: what the cluster fetch Job does, as the job registry records it.

A fetch Job is a lanenb job like a training run (``get_job``, ``%lanejobs``, ``lanenb jobs
logs/wait/cancel``), run by the ``kubernetes-fetch`` backend. Its registry row holds this spec
instead of a ``TrainSpec``; the backend's ``spec_from_dict`` reads it back. No ``kubernetes``
import here: listing jobs must not need the client.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lanenb.contract.fields import coerce_bool
from lanenb.contract.spec import PULL_POLICIES, SpecError
from lanenb.kube.rules import name_problem

__all__ = ["BACKEND", "FetchSpec", "fetch_job_name"]

BACKEND = "kubernetes-fetch"
# a storage request as PVCs are written (100Gi, 1.5Ti, 500G); build_fetch_pvc checks with it too
STORAGE_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")


def fetch_job_name(dataset: str, pvc: str) -> str:
    """``fetch-<dataset>-<pvc>-<4 hex>`` cut to a valid label (a Job's name labels its pods); the
    suffix lets a PVC be filled again later without the old record's name in the way."""
    suffix = secrets.token_hex(2)
    stem = re.sub(r"[^a-z0-9-]", "-", f"fetch-{dataset}-{pvc}".lower())[:57].strip("-")
    return f"{stem}-{suffix}"


@dataclass
class FetchSpec:
    """A dataset fetch into a PVC, run as a ``batch/v1`` Job.

    Args:
        dataset: ``tusimple`` or ``culane``.
        pvc: the claim to fill (created with ``size``/``storage_class`` unless it exists).
        image: the trainer image (it carries ``lanenb_trainer.datasets.fetch``).
        namespace: default: the kubeconfig context's namespace, else ``default``.
        size, storage_class: of a PVC that has to be created (``storage_class=None``: the
            cluster's default class).
        create_pvc: ``False``: the PVC must exist already.
        mount_path: where the pod mounts the PVC; the dataset lands in ``<mount_path>/<dataset>``.
        parts, mirrors, urls, default_urls: as ``lanenb data fetch`` (``urls`` are its
            ``--url [ARCHIVE=]URL`` values).
        progress_every: seconds between two progress lines in the pod's log.
        context: the kubeconfig context (default: the current one).
        name: the job's name (default ``fetch-<dataset>-<pvc>-<4 hex>``).
        openshift: a pod that passes OpenShift's ``restricted`` SCC and Pod Security
            "restricted" (non-root, no privilege escalation, no capabilities, RuntimeDefault
            seccomp, a writable ``HOME``), as training's ``k8s.openshift``; None: on when the
            API server serves ``security.openshift.io``. The PVC must then be writable by the
            namespace's UID range (the restricted SCC's ``fsGroup`` sees to that on most volumes).

    Raises:
        SpecError: a field has a bad value (the message names it).
        UnknownDatasetError: an unknown dataset or part.
    """

    dataset: str = "tusimple"
    pvc: str = ""
    image: str = ""
    namespace: str | None = None
    size: str = "100Gi"
    storage_class: str | None = None
    create_pvc: bool = True
    mount_path: str = "/mnt"
    parts: list[str] = field(default_factory=list)
    mirrors: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    default_urls: bool = True
    backoff_limit: int = 3
    image_pull_policy: str = "IfNotPresent"
    active_deadline_seconds: int | None = None
    progress_every: float = 5.0
    context: str | None = None
    name: str | None = None
    backend: str = BACKEND
    openshift: bool | None = None

    def __post_init__(self) -> None:
        from lanenb_trainer.datasets.sources import get_source

        source = get_source(self.dataset)  # UnknownDatasetError names a bad dataset or part
        for part in self.parts if isinstance(self.parts, (list, tuple)) else ():
            source.select([part])
        self.dataset = source.name
        self._name("pvc", self.pvc, "subdomain")
        if not isinstance(self.image, str) or not self.image or any(c.isspace() for c in self.image):
            raise SpecError("image", self.image, "the trainer image (e.g. registry/lanenb-trainer:0.1) is required")
        if self.namespace is not None:
            self._name("namespace", self.namespace, "label")
        if not isinstance(self.size, str) or not STORAGE_QUANTITY.match(self.size):
            raise SpecError("size", self.size, "expected a Kubernetes quantity such as 100Gi")
        if self.storage_class is not None:
            self._name("storage_class", self.storage_class, "subdomain")
        if not isinstance(self.mount_path, str) or not self.mount_path.startswith("/") or self.mount_path == "/":
            raise SpecError("mount_path", self.mount_path, "must be an absolute path other than /")
        if self.image_pull_policy not in PULL_POLICIES:
            raise SpecError("image_pull_policy", self.image_pull_policy, f"must be one of {', '.join(PULL_POLICIES)}")
        if isinstance(self.backoff_limit, bool) or not isinstance(self.backoff_limit, int) or self.backoff_limit < 0:
            raise SpecError("backoff_limit", self.backoff_limit, "must be an integer >= 0")
        if self.active_deadline_seconds is not None and (
                isinstance(self.active_deadline_seconds, bool) or not isinstance(self.active_deadline_seconds, int)
                or self.active_deadline_seconds < 1):
            raise SpecError("active_deadline_seconds", self.active_deadline_seconds, "must be an integer >= 1 or None")
        if isinstance(self.progress_every, bool) or not isinstance(self.progress_every, (int, float)) \
                or not self.progress_every >= 0:
            raise SpecError("progress_every", self.progress_every, "must be a number of seconds >= 0")
        if self.backend != BACKEND:
            raise SpecError("backend", self.backend, f"a fetch Job runs on the {BACKEND!r} backend")
        for what in ("parts", "mirrors", "urls"):
            value = getattr(self, what)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise SpecError(what, value, "must be a list of non-empty strings")
            setattr(self, what, list(value))
        if self.openshift is not None:
            self.openshift = coerce_bool("openshift", self.openshift)
        if self.name is None:
            self.name = fetch_job_name(self.dataset, self.pvc)
        self._name("name", self.name, "label")

    @staticmethod
    def _name(what: str, value: Any, kind: str) -> None:
        problem = name_problem(value, kind)
        if problem:
            raise SpecError(what, value, problem)

    @property
    def dataset_path(self) -> str:
        """Where the dataset lies inside a pod that mounts the PVC at ``mount_path``."""
        return f"{self.mount_path.rstrip('/')}/{self.dataset}"

    @property
    def downloads_path(self) -> str:
        """Archives download onto the PVC, so a pod restarted by the Job resumes them."""
        return f"{self.mount_path.rstrip('/')}/.lanenb-downloads"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FetchSpec:
        """The inverse of ``to_dict``; an unknown key is an error, not silently dropped."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError("fetch spec", unknown, f"unknown field(s); known: {', '.join(sorted(known))}")
        return cls(**dict(data))
