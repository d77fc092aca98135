"""MPIJob conditions + pod states -> ``JobStatus`` with a reason a person can act on.

The operator's conditions say *that* a job is stuck; the pods say *why* (no GPU left,
image cannot be pulled, missing volume claim, out of memory). We read both.
"""

from __future__ import annotations

import calendar
import re
import time
from typing import Any, Iterable

from ...status import JobState, JobStatus
from .events import event_problem
from .manifests import JOB_ROLE_LABEL

__all__ = ["mpijob_status", "pod_problem", "missing_status", "parse_time"]

_PULL_REASONS = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (``2024-01-02T03:04:05Z``) -> UNIX seconds."""
    if not value:
        return None
    try:
        return float(calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _conditions(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type"): c for c in (job.get("status") or {}).get("conditions") or [] if c.get("type")}


def _true(conds: dict[str, dict[str, Any]], kind: str) -> bool:
    return str(conds.get(kind, {}).get("status")) == "True"


def _role(pod: dict[str, Any]) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    role = labels.get(JOB_ROLE_LABEL, "pod")
    index = labels.get("training.kubeflow.org/replica-index")
    return f"{role}-{index}" if index is not None else role


def _gpus_requested(pod: dict[str, Any]) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        try:
            total += int(limits.get("nvidia.com/gpu", 0))
        except (TypeError, ValueError):
            pass
    return total


def pod_problem(pod: dict[str, Any]) -> str | None:
    """The first thing keeping this pod from running, in plain words, or None."""
    name = (pod.get("metadata") or {}).get("name", "?")
    who = f"{_role(pod)} pod {name}"
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            msg = cond.get("message") or ""
            claim = re.search(r'persistentvolumeclaim "([^"]+)" not found', msg)
            if claim:
                return (f"volume claim {claim.group(1)!r} does not exist in this namespace: create the PVC or fix "
                        f"volumes= ({who}: {msg})")
            if "nvidia.com/gpu" in msg:
                gpus = _gpus_requested(pod)
                return f"waiting for {gpus} GPU(s) per worker: {msg} (Unschedulable)"
            if "Insufficient" in msg:
                return f"not enough cluster resources for {who}: {msg} (Unschedulable)"
            return f"{who} cannot be scheduled: {msg or cond.get('reason')} ({cond.get('reason') or 'Unschedulable'})"
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        last = (cs.get("lastState") or {}).get("terminated") or {}
        image = cs.get("image") or _container_image(pod, cs.get("name"))
        if waiting:
            reason, msg = waiting.get("reason") or "", waiting.get("message") or ""
            if reason in _PULL_REASONS:
                return (f"cannot pull image {image!r} ({reason}): check the image name and tag, that the registry is "
                        f"reachable from the cluster, and imagePullSecrets. {msg}".strip())
            if reason == "CrashLoopBackOff":
                why = "ran out of memory (OOMKilled)" if last.get("reason") == "OOMKilled" else \
                    f"exited with code {last.get('exitCode')}" if last else "keeps exiting"
                return f"{who} keeps crashing (CrashLoopBackOff): it {why}; see its logs"
            if reason in ("CreateContainerConfigError", "CreateContainerError", "RunContainerError"):
                return f"{who} cannot start ({reason}): {msg}"
        if (terminated or {}).get("reason") == "OOMKilled" or last.get("reason") == "OOMKilled":
            return (f"{who} ran out of memory (OOMKilled): raise memory= or lower batch_size / num_workers")
    return None


def _container_image(pod: dict[str, Any], name: str | None) -> str | None:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == name:
            return c.get("image")
    return None


def _launcher_exit(pods: Iterable[dict[str, Any]]) -> int | None:
    for pod in pods:
        if ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_ROLE_LABEL) != "launcher":
            continue
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated")
            if term and term.get("exitCode") is not None:
                return int(term["exitCode"])
    return None


def missing_status(namespace: str, name: str) -> JobStatus:
    """LOST (final): the MPIJob is gone and its outcome was never seen, so waiters stop."""
    return JobStatus(
        JobState.LOST, finished=time.time(),
        reason=f"MPIJob {namespace}/{name} no longer exists (deleted by someone else, or removed by "
               "ttlSecondsAfterFinished) and its final state was never seen; its run directory may still hold "
               "checkpoints and metrics",
    )


def mpijob_status(job: dict[str, Any] | None, pods: list[dict[str, Any]] | None = None,
                  events: list[dict[str, Any]] | None = None) -> JobStatus:
    """Read one MPIJob (as returned by the API), its pods and the Warning events about them."""
    pods = pods or []
    if job is None:
        return JobStatus(JobState.LOST, reason="the MPIJob does not exist", finished=time.time())
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    conds = _conditions(job)
    ranks = {(p.get("metadata") or {}).get("name"): _pod_state(p) for p in pods}
    started = parse_time(status.get("startTime")) or parse_time(conds.get("Running", {}).get("lastTransitionTime"))
    finished = parse_time(status.get("completionTime"))
    exit_code = _launcher_exit(pods)
    problems = [p for p in (pod_problem(pod) for pod in pods) if p]
    blocked = event_problem(events or [])

    def make(state: JobState, reason: str | None, cond: str | None = None) -> JobStatus:
        message = conds.get(cond, {}).get("message") if cond else None
        return JobStatus(state, reason=reason, message=message, started=started, finished=finished,
                         ranks=ranks, exit_code=exit_code)

    if _true(conds, "Succeeded"):  # before deletionTimestamp: a TTL clean-up does not undo a success
        return make(JobState.SUCCEEDED, None, "Succeeded")
    if _true(conds, "Failed"):
        cond = conds["Failed"]
        reason = problems[0] if problems else (cond.get("message") or cond.get("reason") or "the launcher failed")
        if exit_code not in (None, 0) and not problems:
            reason = f"{reason} (launcher exit code {exit_code})"
        if cond.get("reason") == "DeadlineExceeded":
            reason = f"stopped after activeDeadlineSeconds: {cond.get('message') or ''}".strip()
        return make(JobState.FAILED, reason, "Failed")
    if meta.get("deletionTimestamp"):
        return make(JobState.CANCELLED, "the MPIJob is being deleted (its pods are stopping)")
    if _true(conds, "Suspended"):
        return make(JobState.SUSPENDED, "suspended (runPolicy.suspend=true); resume to continue", "Suspended")
    if _true(conds, "Restarting"):
        return make(JobState.RESTARTING, problems[0] if problems else conds["Restarting"].get("message"), "Restarting")
    if _true(conds, "Running"):
        return make(JobState.RUNNING, problems[0] if problems else None, "Running")
    if not conds:
        return make(JobState.PENDING, blocked or "waiting for the MPI Operator to pick the job up (no status yet)")
    if problems:
        return make(JobState.PENDING, problems[0], "Created")
    if blocked:
        return make(JobState.PENDING, blocked, "Created")
    if not pods:
        return make(JobState.PENDING, "created; waiting for the operator to create the pods", "Created")
    waiting = [n for n, s in ranks.items() if s not in ("Running", "Succeeded")]
    return make(JobState.PENDING, f"waiting for pods to start: {', '.join(sorted(map(str, waiting)))}" if waiting
                else "waiting for the launcher", "Created")


def _pod_state(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            return state["waiting"]["reason"]
        if state.get("terminated", {}).get("reason") and status.get("phase") in ("Failed",):
            return state["terminated"]["reason"]
    return status.get("phase") or "Pending"
