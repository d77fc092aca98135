"""GPUs by node and in total, GPU quotas by namespace, and when a pending job could start.

Allocated GPUs are counted as ``kubectl describe node`` does: the GPU limits of the pods placed
on the node that have not finished. A user who may not read every namespace's pods sees only
part of that; the view then says the figures are a lower bound (``partial``) instead of
showing free GPUs that are not free.

The start estimate is an estimate, and says so: the earliest moment the GPUs the job needs are
free, counting the GPUs free now plus those the running jobs hold as they end by their ETAs
(else their ``activeDeadlineSeconds``). It ignores the queue (other pending jobs may go first),
how GPUs are spread over nodes, and preemption.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from lanenb.charts.formats import format_duration
from lanenb.team.reasons import GPU as GPU_KIND
from lanenb.team.reasons import QUOTA
from lanenb.team.rows import GPU, TeamJob, pod_gpus

__all__ = ["NodeGpus", "QuotaUse", "RunningEnds", "node_gpus", "quota_use", "running_ends", "start_estimate"]


@dataclass(frozen=True)
class NodeGpus:
    node: str
    allocatable: int
    allocated: int

    @property
    def free(self) -> int:
        return max(0, self.allocatable - self.allocated)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "free": self.free}


@dataclass(frozen=True)
class QuotaUse:
    """One ResourceQuota's GPU line: ``used`` of ``hard`` (``requests.nvidia.com/gpu``)."""

    namespace: str
    quota: str
    resource: str
    used: int
    hard: int

    @property
    def free(self) -> int:
        return max(0, self.hard - self.used)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "free": self.free}


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def node_gpus(nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]]) -> list[NodeGpus]:
    """Per node with GPUs: allocatable ``nvidia.com/gpu`` and the GPUs of unfinished pods on it."""
    used: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used[node] = used.get(node, 0) + pod_gpus(pod)
    out = []
    for node in nodes:
        name = (node.get("metadata") or {}).get("name") or "?"
        alloc = _int(((node.get("status") or {}).get("allocatable") or {}).get(GPU))
        if alloc or used.get(name):
            out.append(NodeGpus(name, alloc, used.get(name, 0)))
    return sorted(out, key=lambda n: n.node)


def quota_use(quotas: Iterable[dict[str, Any]]) -> list[QuotaUse]:
    """The GPU lines of ResourceQuotas (``requests.nvidia.com/gpu``; ``limits.`` where a cluster
    spells it so), from the quota controller's ``status.used``."""
    out = []
    for quota in quotas:
        meta, status = quota.get("metadata") or {}, quota.get("status") or {}
        hard = status.get("hard") or (quota.get("spec") or {}).get("hard") or {}
        for resource in sorted(hard):
            if resource.endswith(GPU):
                out.append(QuotaUse(meta.get("namespace") or "", meta.get("name") or "", resource,
                                    _int((status.get("used") or {}).get(resource)), _int(hard[resource])))
    return sorted(out, key=lambda q: (q.namespace, q.quota))


@dataclass(frozen=True)
class RunningEnds:
    """The running jobs in the order they are expected to end (``ends``: time, why, job) and
    those with no expected end (``unknown``): computed once a view, read by every estimate."""

    ends: list[tuple[float, str, TeamJob]]
    unknown: dict[str, int]  # namespace -> running jobs there with no expected end


def running_ends(running: list[TeamJob], now: float) -> RunningEnds:
    ends: list[tuple[float, str, TeamJob]] = []
    unknown: dict[str, int] = {}
    for r in running:
        found = r.ends_at(now)
        if found is None:
            unknown[r.namespace] = unknown.get(r.namespace, 0) + 1
        else:
            ends.append((found[0], found[1], r))
    return RunningEnds(sorted(ends, key=lambda e: e[0]), unknown)


def start_estimate(job: TeamJob, running: RunningEnds, free_now: int | None, now: float,
                   quota: QuotaUse | None = None) -> str | None:
    """A pending job's estimated start, labelled as an estimate; None when GPUs are not what it
    waits for (an image, a missing volume) or it needs none.

    Args:
        job: the pending job (``waiting.kind`` says what it waits for).
        running: the running jobs by expected end (``running_ends``).
        free_now: GPUs free in the cluster now (by node allocatable minus allocated); None when
            the nodes are not readable (then no cluster-wide estimate).
        now: the clock.
        quota: for a job held by its namespace's quota, that quota (the GPUs counted are then
            the quota's free ones plus those the same namespace's jobs hold).
    """
    kind = job.waiting.kind if job.waiting is not None else None
    if job.gpus == 0 or kind not in (GPU_KIND, QUOTA):
        return None
    same_ns = kind == QUOTA
    if same_ns:
        if quota is None:
            return None
        free = quota.free
    elif free_now is None:
        return "no estimate: the nodes' GPU capacity is not readable"
    else:
        free = free_now
    if free >= job.gpus:
        return None  # enough GPUs already: what it waits for is not capacity
    waited_for: list[str] = []
    for end, reason, r in running.ends:
        if same_ns and r.namespace != job.namespace:
            continue
        free += r.gpus_held
        waited_for.append(f"{r.namespace}/{r.name} ({reason})")
        if free >= job.gpus:
            names = ", ".join(waited_for[:3]) + (f" and {len(waited_for) - 3} more" if len(waited_for) > 3 else "")
            verb = "ends" if len(waited_for) == 1 else "end"
            return f"estimate: could start in ~{format_duration(end - now)}, when {names} {verb}"
    unknown = running.unknown.get(job.namespace, 0) if same_ns else sum(running.unknown.values())
    return (f"no estimate: {job.gpus} GPUs needed, {free} free once the jobs with an ETA end"
            + (f"; {unknown} running job(s) have no ETA" if unknown else ""))
