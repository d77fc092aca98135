"""What may I do here? ``SelfSubjectAccessReview``, the question ``kubectl auth can-i`` asks.

A view offers Stop on a teammate's job only where the cluster's RBAC would let the delete
through, and says so before anyone clicks: the API server answers for the caller's own
credentials, so no role has to be read (which most users may not do anyway).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from lanenb.kube.client import Clients, KubernetesError

__all__ = ["can_i"]


def can_i(clients: Clients, verb: str, resource: str, *, group: str = "", namespace: str | None = None,
          subresource: str | None = None, name: str | None = None) -> bool:
    """Whether the API server would allow ``verb`` on ``resource`` (in ``namespace``; None: across
    all namespaces or a cluster-scoped resource) for these credentials. False when the review
    itself cannot be made (an API server that refuses reviews allows nothing we can show)."""
    attrs: dict[str, Any] = {"verb": verb, "resource": resource, "group": group}
    for key, value in (("namespace", namespace), ("subresource", subresource), ("name", name)):
        if value:
            attrs[key] = value
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs}}
    api = k8s.AuthorizationV1Api(clients.api)
    try:
        resp = clients.raw(api.create_self_subject_access_review, body, what=f"asking whether we may {verb} {resource}")
        return bool((json.loads(resp.data).get("status") or {}).get("allowed"))
    except (ApiException, KubernetesError, ValueError):
        return False
