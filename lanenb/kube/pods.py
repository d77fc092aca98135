"""Pod states in plain words: what keeps a pod from running (no GPU left, an image that cannot
be pulled, a missing volume claim, out of memory), for every lanenb object that runs pods
(MPIJob workers and launchers, dataset fetch Jobs)."""

from __future__ import annotations

import calendar
import re
import time
from typing import Any

__all__ = ["pod_problem", "pod_state", "parse_time", "JOB_NAME_LABEL", "JOB_ROLE_LABEL"]

# set by the Kubeflow MPI Operator on every pod it creates
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
_PULL_REASONS = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (``2024-01-02T03:04:05Z``) -> UNIX seconds."""
    if not value:
        return None
    try:
        return float(calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


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


def pod_state(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            return state["waiting"]["reason"]
        if state.get("terminated", {}).get("reason") and status.get("phase") in ("Failed",):
            return state["terminated"]["reason"]
    return status.get("phase") or "Pending"
