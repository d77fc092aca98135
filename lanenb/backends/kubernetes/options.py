"""``KubernetesOptions``: what only the Kubernetes backend reads (scheduling, MPIJob policy,
RUN:AI project, NCCL/RDMA); the local backend ignores them. Checked at construction with the
apiserver's own rules, so a bad toleration fails in the notebook cell, not at pod creation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lanenb.contract.fields import (
    BackendOptions,
    check_choice,
    check_rfc1123_label,
    check_rfc1123_subdomain,
    coerce_bool,
    coerce_env,
    coerce_int,
    coerce_labels,
    coerce_opt_str,
)
from lanenb.errors import SpecError
from lanenb.kube.rules import toleration_problem

__all__ = ["KubernetesOptions", "CLEAN_POD_POLICIES"]

CLEAN_POD_POLICIES = ("Running", "All", "None")
_RESOURCE_NAME = re.compile(r"^rdma/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# labels the manifest (lanenb's own, RUN:AI's project) or the MPI Operator set on the job and its pods
_RESERVED_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/name", "app.kubernetes.io/instance", "project")
_RESERVED_LABEL_PREFIX = "training.kubeflow.org/"


@dataclass
class KubernetesOptions(BackendOptions):
    """Options only the Kubernetes backend reads; ignored by the local backend.

    Args:
        service_account: the pods' service account (``ENABLE_SNAPSHOT`` needs one allowed to
            create VolumeSnapshots).
        node_selector: node labels the pods must match.
        tolerations: Kubernetes toleration dicts (checked with the apiserver's rules).
        slots_per_worker: MPI slots (ranks) per worker pod.
        clean_pod_policy: the MPIJob's: Running, All or None.
        backoff_limit: launcher retries after a failed launcher pod (a preemption exits 75, a lost
            worker or a crash non-zero). Each retry continues from the run's last checkpoint
            (the ranks get ``--run-id``, so a checkpoint of this job in its run dir is resumed);
            0: a failure is final.
        termination_grace_seconds: the pods' ``terminationGracePeriodSeconds``: how long a
            SIGTERMed rank has to checkpoint (the step under way and the next, the checkpoint,
            the exit) before SIGKILL. None: ``manifests.DEFAULT_TERMINATION_GRACE_S``, sized from
            the measured checkpoint time.
        ttl_seconds_after_finished: delete the MPIJob this long after it ends (None: keep it).
        active_deadline_seconds: fail the job after this long.
        runai_project: schedule with RUN:AI in namespace ``runai-<project>``.
        nccl_env: ``NCCL_*`` variables for every rank.
        rdma_resources: RDMA device requests per pod, e.g. ``{"rdma/shared_ib": 1}``.
        context: the kubeconfig context (None: the current one).
        openshift: render pods that pass OpenShift's ``restricted`` SCC and Pod Security
            "restricted" (non-root arbitrary UID, sshd on port 2222, keys under a writable
            ``HOME``); None: on when the API server serves ``security.openshift.io``.
        labels: more labels on the MPIJob and its pods (``kubectl get mpijobs -l KEY=VALUE``
            finds them; a sweep labels its trials ``lanenb.io/sweep`` and ``lanenb.io/trial``),
            checked with the API server's rules; lanenb's own and the operator's keys are refused.
        network_policy: a NetworkPolicy owned by the MPIJob lets only the job's own pods reach
            its pods (ssh, the rendezvous and the collectives, which take any peer that
            connects); False where the cluster's own policies already isolate jobs, or its
            network plug-in enforces none.

    Raises:
        SpecError: a bad option; the message names it as ``k8s.<option>``.
    """

    section: ClassVar[str] = "k8s"

    service_account: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    slots_per_worker: int = 1
    clean_pod_policy: str = "Running"
    backoff_limit: int = 3
    termination_grace_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    runai_project: str | None = None
    nccl_env: dict[str, str] = field(default_factory=dict)
    rdma_resources: dict[str, int] = field(default_factory=dict)
    context: str | None = None
    openshift: bool | None = None
    labels: dict[str, str] = field(default_factory=dict)
    network_policy: bool = True

    def __post_init__(self) -> None:
        p = "k8s."
        self.network_policy = coerce_bool(p + "network_policy", self.network_policy)
        if self.service_account is not None:
            check_rfc1123_subdomain(p + "service_account", self.service_account)
        if not isinstance(self.node_selector, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in self.node_selector.items()
        ):
            raise SpecError(p + "node_selector", self.node_selector, "must be a dict of string labels to string values")
        self.node_selector = dict(self.node_selector)
        if not isinstance(self.tolerations, (list, tuple)) or not all(isinstance(t, Mapping) for t in self.tolerations):
            raise SpecError(p + "tolerations", self.tolerations, "must be a list of toleration dicts")
        for tol in self.tolerations:
            problem = toleration_problem(tol)  # the apiserver's rules, before the pod is refused
            if problem:
                raise SpecError(p + "tolerations", dict(tol), problem)
        self.tolerations = [dict(t) for t in self.tolerations]
        self.slots_per_worker = coerce_int(p + "slots_per_worker", self.slots_per_worker, 1)  # type: ignore[assignment]
        check_choice(p + "clean_pod_policy", self.clean_pod_policy, CLEAN_POD_POLICIES)
        self.backoff_limit = coerce_int(p + "backoff_limit", self.backoff_limit, 0)  # type: ignore[assignment]
        self.termination_grace_seconds = coerce_int(p + "termination_grace_seconds", self.termination_grace_seconds,
                                                    1, optional=True)
        self.ttl_seconds_after_finished = coerce_int(p + "ttl_seconds_after_finished",
                                                     self.ttl_seconds_after_finished, 0, optional=True)
        self.active_deadline_seconds = coerce_int(p + "active_deadline_seconds", self.active_deadline_seconds, 1,
                                                  optional=True)
        if self.runai_project is not None:
            # the namespace becomes runai-<project>, which must stay a valid label
            check_rfc1123_label(p + "runai_project", self.runai_project, max_len=63 - len("runai-"))
        self.nccl_env = coerce_env(p + "nccl_env", self.nccl_env)
        for key in self.nccl_env:
            if not key.startswith("NCCL_"):
                raise SpecError(p + "nccl_env", key, "only NCCL_* variables pass through here; use env for others")
        if not isinstance(self.rdma_resources, Mapping):
            raise SpecError(p + "rdma_resources", self.rdma_resources, "must be a dict like {'rdma/shared_ib': 1}")
        rdma: dict[str, int] = {}
        for key, count in self.rdma_resources.items():
            if not isinstance(key, str) or not _RESOURCE_NAME.match(key):
                raise SpecError(p + "rdma_resources", key, "resource names must look like 'rdma/shared_ib'")
            rdma[key] = coerce_int(p + f"rdma_resources[{key}]", count, 1)  # type: ignore[assignment]
        self.rdma_resources = rdma
        self.context = coerce_opt_str(p + "context", self.context)
        if self.openshift is not None:
            self.openshift = coerce_bool(p + "openshift", self.openshift)
            if self.openshift and self.rdma_resources:
                raise SpecError(p + "openshift", self.openshift,
                                "RDMA pods need the IPC_LOCK capability, which the restricted policy forbids; "
                                "run RDMA jobs with openshift=False under an SCC that allows IPC_LOCK")
        self._check_labels()

    def _check_labels(self) -> None:
        self.labels = coerce_labels("k8s.labels", self.labels)
        for key, value in self.labels.items():
            if key in _RESERVED_LABELS or key.startswith(_RESERVED_LABEL_PREFIX):
                raise SpecError("k8s.labels", {key: value}, f"{key!r} is set by lanenb or the MPI Operator; "
                                "choose a key of your own (e.g. example.com/team)")
