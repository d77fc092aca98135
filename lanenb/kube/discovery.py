"""What the API server serves (its ``/apis`` group list), e.g. whether the cluster is OpenShift.

OpenShift serves its own API groups beside the Kubernetes ones; ``security.openshift.io``
(SecurityContextConstraints) is the one every OpenShift cluster has, and the one that makes pods
run as an arbitrary non-root UID, which is what the Kubernetes backend has to know.
"""

from __future__ import annotations

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from lanenb.kube.client import Clients, KubernetesAPIError

__all__ = ["OPENSHIFT_GROUP", "api_groups", "is_openshift"]

OPENSHIFT_GROUP = "security.openshift.io"


def api_groups(clients: Clients) -> set[str]:
    """The names of the API groups the server lists under ``/apis`` (the core group is not one).

    Raises:
        KubernetesAPIError: the server refused the discovery request.
        KubernetesUnreachableError: it did not answer.
    """
    try:
        groups = clients.call(k8s.ApisApi(clients.api).get_api_versions, what="API discovery (/apis)")
    except ApiException as exc:
        raise KubernetesAPIError(f"API discovery (/apis) on {clients.where()} failed: {exc.status} {exc.reason}",
                                 exc.status, exc.body) from exc
    return {g.name for g in groups.groups or []}


def is_openshift(clients: Clients) -> bool:
    """True when the cluster serves ``security.openshift.io`` (OpenShift's security constraints)."""
    return OPENSHIFT_GROUP in api_groups(clients)
