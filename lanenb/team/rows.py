"""One team-table row from what the cluster says about one MPIJob: whose, where, how big, its
state (with the short reason a pending job waits), how long it ran, and, where its launcher's
events were readable, progress, ETA, the headline figure and GPU utilisation."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lanenb.backends.kubernetes.status import mpijob_status
from lanenb.kube.identity import user_of
from lanenb.kube.pods import parse_time
from lanenb.team.reasons import Waiting, waiting_reason

if TYPE_CHECKING:
    from lanenb.analysis.runstate import RunState

__all__ = ["TeamJob", "team_job", "pod_gpus", "creator"]

GPU = "nvidia.com/gpu"


def pod_gpus(pod: Mapping[str, Any]) -> int:
    """The GPUs a pod holds: its containers' ``nvidia.com/gpu`` limits (for an extended resource
    Kubernetes requires request == limit, and a spec may give either)."""
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("limits") or {}).get(GPU) or (res.get("requests") or {}).get(GPU) or 0
        try:
            total += int(str(value))
        except ValueError:
            pass
    return total


def creator(metadata: Mapping[str, Any]) -> str | None:
    """The client that created the object (``managedFields``' Create entry): the best a cluster
    says about who made a job lanenb did not label (``kubectl``, a controller, a script)."""
    for entry in metadata.get("managedFields") or []:
        if entry.get("operation") == "Create" and entry.get("manager"):
            return f"{entry['manager']} (creator)"
    return None


@dataclass
class TeamJob:
    """A row of the team view; ``to_dict`` is what the sidebar reads."""

    namespace: str
    name: str
    uid: str
    user: str | None
    mine: bool
    created: float | None
    started: float | None
    finished: float | None
    state: str
    reason: str | None
    waiting: Waiting | None
    workers: int
    gpus_per_worker: int
    ranks: int
    gpus_held: int = 0  # GPUs of its pods placed on nodes now
    nodes: list[str] = field(default_factory=list)
    launcher: str | None = None  # the launcher pod's name (its log holds the events)
    deadline_s: float | None = None  # runPolicy.activeDeadlineSeconds: it ends by start + this at the latest
    progress: float | None = None
    eta_s: float | None = None
    headline: str | None = None
    gpu_util: float | None = None
    can_cancel: bool = False
    start_estimate: str | None = None
    _fixed: dict[str, Any] | None = field(default=None, repr=False, compare=False)  # to_dict's unchanging part

    @property
    def final(self) -> bool:
        """Nothing will change any more (no Stop to offer)."""
        return self.state in ("succeeded", "failed", "cancelled", "preempted", "lost")

    @property
    def gpus(self) -> int:
        """GPUs the job asks for in all (every worker's)."""
        return self.workers * self.gpus_per_worker

    @property
    def size(self) -> str:
        """"4 ranks (2x2 GPU)": ranks, then workers x GPUs each."""
        return f"{self.ranks} rank{'s' if self.ranks != 1 else ''} ({self.workers}x{self.gpus_per_worker} GPU)"

    def run_s(self, now: float) -> float | None:
        if self.started is None:
            return None
        return max(0.0, (self.finished or now) - self.started)

    def ends_at(self, now: float) -> tuple[float, str] | None:
        """When the running job will end, and why we think so: its ETA, else its deadline."""
        if self.state != "running":
            return None
        if self.eta_s is not None:
            return now + self.eta_s, "ETA"
        if self.deadline_s is not None and self.started is not None:
            return self.started + self.deadline_s, "deadline"
        return None

    def status_text(self) -> str:
        if self.state == "pending" and self.waiting is not None:
            return f"pending: {self.waiting.text}"
        if self.state in ("failed", "lost") and self.reason:
            return f"{self.state}: {self.reason[:80]}"
        return self.state

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        """JSON-able; the fields that do not change with the clock or the view are built once
        (a row is kept between refreshes while its job does not change)."""
        now = time.time() if now is None else now
        if self._fixed is None:
            self._fixed = {
                "namespace": self.namespace, "name": self.name, "uid": self.uid, "user": self.user,
                "mine": self.mine, "created": self.created, "started": self.started, "finished": self.finished,
                "state": self.state, "reason": self.reason, "status": self.status_text(),
                "waiting": None if self.waiting is None else {"kind": self.waiting.kind, "text": self.waiting.text},
                "workers": self.workers, "gpus_per_worker": self.gpus_per_worker, "ranks": self.ranks,
                "gpus": self.gpus, "size": self.size, "gpus_held": self.gpus_held, "nodes": self.nodes,
                "progress": self.progress, "eta_s": self.eta_s, "headline": self.headline, "gpu_util": self.gpu_util,
            }
        return {**self._fixed, "run_s": self.run_s(now), "can_cancel": self.can_cancel,
                "start_estimate": self.start_estimate}


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


def _shape(job: Mapping[str, Any]) -> tuple[int, int, int]:
    """(workers, GPUs per worker, ranks) from the MPIJob's spec (lanenb's annotation for ranks)."""
    spec = job.get("spec") or {}
    worker = (spec.get("mpiReplicaSpecs") or {}).get("Worker") or {}
    workers = _int(worker.get("replicas"), 1)
    gpus = pod_gpus(worker.get("template") or {})
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    ranks = _int(annotations.get("lanenb/spec-processes"), workers * _int(spec.get("slotsPerWorker"), 1))
    return workers, gpus, ranks


def _utilisation(state: RunState) -> float | None:
    values = [float(v["gpu_util"]) for v in state.system_last.values() if isinstance(v.get("gpu_util"), (int, float))]
    return sum(values) / len(values) if values else None


def team_job(job: Mapping[str, Any], pods: list[dict[str, Any]], events: list[dict[str, Any]],
             state: RunState | None = None, *, me: frozenset[str] = frozenset()) -> TeamJob:
    """The row of ``job`` (an MPIJob as the API returns it), its pods and the Warning events about
    them; ``state``: its launcher's events folded (None where unreadable); ``me``: the names that
    mean the current user (their submitter name and its label form)."""
    meta = job.get("metadata") or {}
    status = mpijob_status(dict(job), pods, events)
    workers, gpus_per_worker, ranks = _shape(job)
    user = user_of(meta) or creator(meta)
    held = [p for p in pods if (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") in ("Running", "Pending")]
    launcher = next((p["metadata"]["name"] for p in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp")
                                                            or "", reverse=True)
                     if ((p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-role")) == "launcher"),
                    None)
    deadline = ((job.get("spec") or {}).get("runPolicy") or {}).get("activeDeadlineSeconds")
    row = TeamJob(
        namespace=meta.get("namespace") or "", name=meta.get("name") or "", uid=meta.get("uid") or "",
        user=user, mine=bool(user) and (user in me or (meta.get("labels") or {}).get("lanenb.io/user") in me),
        created=parse_time(meta.get("creationTimestamp")), started=status.started, finished=status.finished,
        state=status.state.value, reason=status.reason,
        waiting=waiting_reason(status.reason, pods, events) if status.state.value == "pending" else None,
        workers=workers, gpus_per_worker=gpus_per_worker, ranks=ranks,
        gpus_held=sum(pod_gpus(p) for p in held), nodes=sorted({p["spec"]["nodeName"] for p in held}),
        launcher=launcher, deadline_s=float(deadline) if isinstance(deadline, (int, float)) else None,
    )
    if state is not None:
        row.progress = 1.0 if row.state == "succeeded" and state.total_steps else state.progress
        row.eta_s = state.eta_s if row.state == "running" else None
        found = state.headline()
        row.headline = None if found is None else str(found.to_dict().get("cell"))
        row.gpu_util = _utilisation(state) if row.state == "running" else None
    return row
