"""The team view: every lanenb MPIJob the user may read, with who runs it, why it waits, GPU
capacity and quotas (``%lanejobs --team``, ``lanenb jobs list --team``, the sidebar's Team section).

``team_view()`` returns a ``TeamView``. In a kernel or the Jupyter server one ``TeamCollector``
per cluster and namespace set is kept (``shared_collector``): it lists once and then follows
watches, so each later view is computed from memory; it stops watching after ``IDLE_S`` unseen.
``stop_team_job`` deletes a teammate's job where RBAC allows it, and only when ``confirm``
repeats its name.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from kubernetes.client.exceptions import ApiException

from lanenb.errors import UserError
from lanenb.kube.access import can_i
from lanenb.kube.client import MPIJOB_GROUP, MPIJOB_PLURAL, MPIJOB_VERSION, Clients, KubernetesAPIError, KubernetesError
from lanenb.kube.names import check_label
from lanenb.team.azureml import WorkspaceJobs
from lanenb.team.collector import IDLE_S, TeamCollector
from lanenb.team.view import TeamView, Unreadable

__all__ = ["TeamView", "TeamCollector", "WorkspaceJobs", "team_view", "shared_collector", "stop_team_job",
           "TeamPermissionError", "TeamConfirmationError", "close_shared", "IDLE_S"]

# the watching collectors, least recently used first: each holds ~7 threads and 5 API watches, so
# a server answering many distinct ?namespace= lists keeps at most MAX_SHARED of them
_SHARED: OrderedDict[tuple[str | None, str | None, tuple[str, ...]], TeamCollector] = OrderedDict()
MAX_SHARED = 8
MAX_NAMESPACES = 32  # namespaces one team view may name
_WORKSPACES: dict[Any, WorkspaceJobs] = {}  # one reader per AzureML workspace, per process
_LOCK = threading.Lock()


class TeamPermissionError(UserError, PermissionError):
    """RBAC does not let this user do that to a teammate's job (the API server said so)."""


class TeamConfirmationError(UserError, ValueError):
    """A stop request whose ``confirm`` does not repeat the job's name."""


def _clients(context: str | None, kubeconfig: str | None) -> Clients:
    from lanenb.backends.kubernetes.backend import KubernetesBackend

    return KubernetesBackend(context=context, kubeconfig=kubeconfig).clients()


def shared_collector(*, context: str | None = None, kubeconfig: str | None = None,
                     namespaces: Sequence[str] | None = None) -> TeamCollector:
    """The watching collector of this cluster and namespace set, started on first use (or again
    after it went idle). One per process: every sidebar and ``%lanejobs --team`` share it.

    The set is sorted and deduplicated (``b,a`` and ``a,b,a`` are one collector), at most
    ``MAX_NAMESPACES`` long, and at most ``MAX_SHARED`` collectors watch at once: the least
    recently used one is closed to make room (read permission alone must not let a client make
    the server hold a watch per request).

    Raises:
        UserError: more than ``MAX_NAMESPACES`` namespaces, or one that is no namespace name.
    """
    wanted = tuple(sorted({check_label("namespace", n) for n in namespaces or ()}))
    if len(wanted) > MAX_NAMESPACES:
        raise UserError(f"namespaces: {len(wanted)} given, at most {MAX_NAMESPACES} in one team view "
                        "(leave them out to see every namespace you may list)")
    key = (context, kubeconfig, wanted)
    with _LOCK:
        found = _SHARED.get(key)
        if found is not None and found.watching:
            _SHARED.move_to_end(key)
            return found
        if found is not None:
            del _SHARED[key]
        while len(_SHARED) >= MAX_SHARED:
            _, oldest = _SHARED.popitem(last=False)
            oldest.close()
        collector = TeamCollector(_clients(context, kubeconfig), wanted or None).start(watch=True)
        _SHARED[key] = collector
        return collector


def close_shared() -> None:
    """Stop every shared collector (tests; a server shutting down)."""
    with _LOCK:
        for collector in _SHARED.values():
            collector.close()
        _SHARED.clear()
        _WORKSPACES.clear()


def _cluster_view(context: str | None, kubeconfig: str | None, namespaces: Sequence[str] | None,
                  watch: bool) -> TeamView:
    if watch:
        return shared_collector(context=context, kubeconfig=kubeconfig, namespaces=namespaces).view()
    collector = TeamCollector(_clients(context, kubeconfig), namespaces).start(watch=False)
    try:
        return collector.view()
    finally:
        collector.close()


def _workspace_jobs(azureml: WorkspaceJobs | bool | None) -> WorkspaceJobs | None:
    """The AzureML part: given, or (None) the configured workspace's shared reader, if any."""
    if azureml is False:
        return None
    if isinstance(azureml, WorkspaceJobs):
        return azureml
    from lanenb.team.azureml import configured_workspace

    ref = configured_workspace()
    if ref is None or importlib.util.find_spec("azure.ai.ml") is None:
        if azureml is True:
            raise UserError("no AzureML workspace is configured for the team view: set AZURE_SUBSCRIPTION_ID, "
                            "AZURE_RESOURCE_GROUP and AZUREML_WORKSPACE_NAME, or put the studio's config.json "
                            "in this folder (and pip install 'lanenb[azureml]')")
        return None
    with _LOCK:
        found = _WORKSPACES.get(ref)
        if found is None:
            found = _WORKSPACES[ref] = WorkspaceJobs(ref)
        return found


def _registry_names() -> set[str]:
    """This user's AzureML jobs (their rows say "(you)")."""
    from lanenb.registry.jobs import JobRegistry

    try:
        return {str((r.handle or {}).get("name") or r.name) for r in JobRegistry().list() if r.backend == "azureml"}
    except UserError:
        return set()


def team_view(*, context: str | None = None, kubeconfig: str | None = None, namespaces: Sequence[str] | None = None,
              watch: bool = True, azureml: WorkspaceJobs | bool | None = None) -> TeamView:
    """The team view: the cluster's lanenb MPIJobs and, where a workspace is configured, the
    lanenb jobs of the AzureML workspace. ``watch``: from the shared, watching collector (cheap
    to ask again); else one list of each resource and one progress pass, then nothing left
    running (the CLI). ``azureml``: None picks the workspace the environment or a config.json
    names (none: no AzureML part); False leaves it out; a ``WorkspaceJobs`` reads that one.

    Raises:
        KubernetesError: no kubeconfig, or the cluster cannot be reached, and no AzureML
            workspace to show instead (with one, the view says the cluster could not be read).
        UserError: ``azureml=True`` and no workspace is configured.
    """
    workspace = _workspace_jobs(azureml)
    try:
        view = _cluster_view(context, kubeconfig, namespaces, watch)
    except KubernetesError as exc:
        if workspace is None:
            raise
        view = TeamView(user="?", scope="namespaces", namespaces=[], jobs=[], nodes=[], quotas=[],
                        unreadable=[Unreadable("MPIJobs", None, "no Kubernetes jobs are listed", str(exc), code=0)])
    if workspace is not None:
        rows, unreadable = workspace.read(mine=_registry_names)
        view.jobs = [*view.jobs, *rows]
        view.unreadable = [*view.unreadable, *unreadable]
        view.workspaces = [*view.workspaces, workspace.ref.workspace]
    return view


def stop_team_job(namespace: str, name: str, confirm: Any, *, uid: str | None = None, context: str | None = None,
                  kubeconfig: str | None = None) -> dict[str, Any]:
    """Delete MPIJob ``namespace/name`` (Foreground: its pods go first), a teammate's or one's own.

    Only when ``confirm`` repeats ``name`` (or ``namespace/name``), only a lanenb job (label
    ``app.kubernetes.io/managed-by=lanenb``: another tool's MPIJob is not the team view's to
    stop), and only where the API server says we may (``SelfSubjectAccessReview`` before the
    delete, so a refused user gets one clear line). The delete always carries a uid precondition:
    ``uid`` (the row's), else the one read now, so the API server refuses to delete another job
    that took the name meanwhile.

    Returns:
        ``{namespace, name, stopped, at}``; ``stopped`` False with ``reason`` when the job was
        gone already (404) or the name is another job's now (409).

    Raises:
        TeamConfirmationError: ``confirm`` is not the job's name.
        TeamPermissionError: RBAC does not allow deleting MPIJobs in ``namespace``, or the MPIJob
            is not lanenb's.
    """
    check_label("namespace", namespace)
    check_label("job name", name)
    if confirm not in (name, f"{namespace}/{name}"):
        raise TeamConfirmationError(f"confirm={confirm!r}: repeat the job's name ({name!r}) to stop it")
    clients = _clients(context, kubeconfig)
    if not can_i(clients, "delete", MPIJOB_PLURAL, group=MPIJOB_GROUP, namespace=namespace):
        raise TeamPermissionError(f"not allowed: your account may not delete MPIJobs in namespace {namespace!r} "
                                  f"(RBAC); ask the job's owner or a namespace admin to stop {name}")
    gone = {"namespace": namespace, "name": name, "stopped": False, "at": time.time()}
    try:
        current = clients.call(clients.custom.get_namespaced_custom_object, MPIJOB_GROUP, MPIJOB_VERSION,
                               namespace, MPIJOB_PLURAL, name, what=f"reading MPIJob {namespace}/{name}")
    except ApiException as exc:
        if exc.status == 404:
            return {**gone, "reason": f"MPIJob {namespace}/{name} does not exist (any more): nothing to stop"}
        raise KubernetesAPIError(f"reading MPIJob {namespace}/{name} failed: {exc.status} {exc.reason}",
                                 exc.status, exc.body) from exc
    meta = (current.get("metadata") if isinstance(current, dict) else None) or {}
    if (meta.get("labels") or {}).get("app.kubernetes.io/managed-by") != "lanenb":
        raise TeamPermissionError(f"MPIJob {namespace}/{name} was not started by lanenb (no label "
                                  "app.kubernetes.io/managed-by=lanenb): stop it with the tool that made it")
    if uid is not None and meta.get("uid") != uid:
        return {**gone, "reason": f"the name {namespace}/{name} belongs to another job now (uid {meta.get('uid')}, "
                                  f"not {uid}): it was left alone"}
    try:
        clients.delete_mpijob(namespace, name, uid or meta.get("uid"))
    except KubernetesAPIError as exc:
        if exc.status == 403:
            raise TeamPermissionError(str(exc)) from exc
        raise
    except ApiException as exc:
        if exc.status == 404:
            return {**gone, "reason": f"MPIJob {namespace}/{name} was gone before the delete: nothing to stop"}
        if exc.status == 409:
            return {**gone, "reason": f"the name {namespace}/{name} was taken by another job meanwhile: it was "
                                      "left alone"}
        raise KubernetesAPIError(f"deleting MPIJob {namespace}/{name} failed: {exc.status} {exc.reason}",
                                 exc.status, exc.body) from exc
    return {**gone, "stopped": True}
