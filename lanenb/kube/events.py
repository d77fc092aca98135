"""Warning Events about one MPIJob, its launcher Job and its pods: the only place a cluster says
why pods were never created (the operator's ValidationError, the Job controller's FailedCreate
for an exceeded quota or a Pod Security violation). ``status`` shows them as pending reasons.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from lanenb.kube.client import Clients

__all__ = ["warning_events", "event_problem"]


def _involves(event: dict[str, Any], job: str, pods: set[str]) -> bool:
    obj = event.get("involvedObject") or event.get("regarding") or {}
    name = obj.get("name") or ""
    return name in (job, f"{job}-launcher") or name in pods or name.startswith((f"{job}-worker-", f"{job}-launcher-"))


def warning_events(clients: Clients, namespace: str, job: str, pods: list[dict[str, Any]] | None = None
                   ) -> list[dict[str, Any]]:
    """The namespace's Warning events about ``job`` (oldest first); [] if events cannot be read
    (a missing RBAC grant must not break ``status``)."""
    names: set[str] = {n for p in pods or [] if (n := (p.get("metadata") or {}).get("name")) is not None}
    try:
        resp = clients.raw(clients.core.list_namespaced_event, namespace, field_selector="type=Warning",
                           what="listing events")
    except ApiException:
        return []
    items = [e for e in json.loads(resp.data).get("items") or [] if _involves(e, job, names)]
    return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or
                  (e.get("metadata") or {}).get("creationTimestamp") or "")


_BLOCKING = {
    "ValidationError": "the MPI Operator refused the MPIJob and will not create its pods",
    "FailedCreate": "the cluster refused to create a pod",
    "MPIJobFailed": "the MPI Operator could not create a pod",
    "ErrResourceExists": "an object the MPI Operator needs already exists",
}


# The API server's words when a namespace's Pod Security level refuses a pod.
_POD_SECURITY = "violates PodSecurity"
_POD_SECURITY_HINT = ("; the namespace enforces Pod Security: submit with k8s.openshift=True (--openshift) for "
                      "non-root pods that pass the restricted level")


def event_problem(events: list[dict[str, Any]]) -> str | None:
    """The newest event that keeps the job from starting, in words, or None."""
    for event in reversed(events):
        reason = event.get("reason") or ""
        if reason in _BLOCKING:
            obj = event.get("involvedObject") or {}
            message = (event.get("message") or "").strip()
            hint = _POD_SECURITY_HINT if _POD_SECURITY in message and "runAsNonRoot" in message else ""
            return f"{_BLOCKING[reason]} ({reason} on {obj.get('kind', 'object')} {obj.get('name')}): {message}{hint}"
    return None
