"""Why a teammate's job waits, in one short line a table cell can hold.

``mpijob_status`` already finds the reason (a pod's PodScheduled condition, a container's
waiting state, a FailedCreate event) and says it at length, with advice for the job's owner.
A team table needs the gist and its kind: "Unschedulable: insufficient nvidia.com/gpu on 3
nodes", "quota: team-quota (requests.nvidia.com/gpu 4 of 4 used, 2 requested)", "image pull:
ImagePullBackOff (img:tag)". The kind decides what the start estimate counts (GPUs freed in
the cluster, or in the namespace's quota), or whether there is an estimate at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Waiting", "waiting_reason", "GPU", "QUOTA", "IMAGE", "OTHER"]

GPU, QUOTA, IMAGE, OTHER = "gpu", "quota", "image", "other"
_PULL = {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}
_INSUFFICIENT = re.compile(r"(\d+) Insufficient ([\w./-]*\w)")
_AVAILABLE = re.compile(r"^\d+/(\d+) nodes are available: (.*?)(?:\. preemption:.*)?$", re.S)
# the API server's words: "exceeded quota: team-quota, requested: requests.nvidia.com/gpu=2,
# used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4"
_QUOTA = re.compile(r"exceeded quota: ([^,]+), requested: ([^,]+?)=(\S+?), used: [^=]+=(\S+?), limited: [^=]+=(\S+)")


@dataclass(frozen=True)
class Waiting:
    """``kind`` (gpu, quota, image, other) and ``text``, the short reason."""

    kind: str
    text: str


def _scheduling(pods: Iterable[dict[str, Any]]) -> Waiting | None:
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") != "PodScheduled" or cond.get("status") != "False":
                continue
            msg = (cond.get("message") or "").strip()
            short = [f"insufficient {res} on {n} node{'s' if n != '1' else ''}"
                     for n, res in _INSUFFICIENT.findall(msg)]
            if short:
                kind = GPU if any("nvidia.com/gpu" in s for s in short) else OTHER
                return Waiting(kind, "Unschedulable: " + ", ".join(short))
            found = _AVAILABLE.match(msg)
            return Waiting(OTHER, f"{cond.get('reason') or 'Unschedulable'}: {found.group(2) if found else msg}")
    return None


def _image(pods: Iterable[dict[str, Any]]) -> Waiting | None:
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in _PULL:
                return Waiting(IMAGE, f"image pull: {waiting['reason']} ({cs.get('image') or '?'})")
    return None


def _quota(events: Iterable[dict[str, Any]]) -> Waiting | None:
    for event in reversed(list(events)):
        found = _QUOTA.search(event.get("message") or "")
        if found:
            name, resource, requested, used, limited = found.groups()
            return Waiting(QUOTA, f"quota: {name} ({resource} {used} of {limited} used, {requested} requested)")
    return None


def waiting_reason(reason: str | None, pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> Waiting:
    """The short reason a pending job waits: the scheduler's, an exceeded quota, an image that
    cannot be pulled, else the first clause of ``reason`` (``JobStatus.reason``)."""
    found = _quota(events) or _scheduling(pods) or _image(pods)
    if found is not None:
        return found
    text = (reason or "waiting").split(": ", 1)[0] if reason and len(reason) > 90 else (reason or "waiting")
    return Waiting(OTHER, text)
