"""The Kubernetes backend: a ``TrainSpec`` becomes a Kubeflow MPI Operator MPIJob.

Layout: ``manifests`` builds the MPIJob, ``client`` connects and retries, ``status`` turns
conditions and pod states into plain words, ``logs`` finds and follows the launcher pod,
``watch`` follows the MPIJob itself, ``names`` checks names before anything is sent.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kubernetes.client.exceptions import ApiException

from lanenb.backends.kubernetes.launcher_log import find_pod, pod_dicts, to_log_lines, to_log_lines_with_cursors
from lanenb.backends.kubernetes.manifests import (
    ManifestError,
    build_env_secret,
    build_mpijob,
    build_network_policy,
    cluster_run_dir,
    env_secret_name,
    literal_secrets,
    namespace_for,
    redact_mpijob,
    render,
)
from lanenb.backends.kubernetes.status import missing_status, mpijob_status
from lanenb.contract.backend import Backend, LogChunk, LogLine
from lanenb.kube.client import (
    INSTALL_HINT,
    MPIJOB_GROUP,
    MPIJOB_PLURAL,
    MPIJOB_VERSION,
    ClientCache,
    Clients,
    KubernetesAPIError,
    KubernetesConfigError,
    KubernetesError,
    KubernetesUnreachableError,
    OperatorNotInstalledError,
    RetryPolicy,
)
from lanenb.kube.discovery import is_openshift
from lanenb.kube.events import warning_events
from lanenb.kube.logs import (
    StampCursor,
    container_terminated,
    follow_pod_lines,
    read_pod,
    read_pod_lines,
    read_pod_lines_after,
)
from lanenb.kube.names import InvalidNameError, check_label
from lanenb.kube.watch import watch_mpijob

if TYPE_CHECKING:
    from lanenb.contract.spec import TrainSpec
    from lanenb.contract.status import JobStatus

__all__ = [
    "KubernetesBackend", "render", "build_mpijob", "KubernetesError", "KubernetesConfigError",
    "KubernetesUnreachableError", "KubernetesAPIError", "OperatorNotInstalledError", "InvalidNameError",
    "ManifestError", "RetryPolicy",
]

SUBMISSION_ANNOTATION = "lanenb/submission-id"


def _uid(job: dict[str, Any] | None) -> str | None:
    return ((job or {}).get("metadata") or {}).get("uid")


def _reused(job: dict[str, Any] | None, uid: str | None) -> bool:
    """Whether ``job`` is another MPIJob than the one with ``uid`` (same name, made later).
    A handle without a uid (submitted by an older lanenb) matches by name, as it always did."""
    return job is not None and bool(uid) and _uid(job) != uid


class KubernetesBackend(Backend):
    """Submit/inspect/cancel MPIJobs. Keeps only connection objects, never per-job state.

    ``context``/``kubeconfig`` choose the cluster (``spec.k8s.context`` wins per job);
    ``clients`` injects ready-made clients (tests, notebooks that already hold one).
    """

    name = "kubernetes"
    datasets_are_volumes = True  # PVCs: the launch form mounts the chosen one

    def __init__(self, *, context: str | None = None, kubeconfig: str | os.PathLike[str] | None = None,
                 in_cluster: bool | None = None, clients: Clients | None = None,
                 retry: RetryPolicy | None = None, timeout: tuple[float, float] | None = None) -> None:
        self._clients = ClientCache(context, kubeconfig, in_cluster=in_cluster, retry=retry, timeout=timeout,
                                    clients=clients)
        self._openshift: dict[tuple[str, str | None], bool] = {}  # (host, context) -> serves OpenShift's groups

    # ------------------------------------------------------------------ plumbing
    def clients(self, context: str | None = None, kubeconfig: str | None = None) -> Clients:
        """Clients for ``context`` of ``kubeconfig`` (defaults: the backend's, then kubectl's).
        A job's handle names both, so a new kernel talks to the cluster the job was sent to."""
        return self._clients.get(context, kubeconfig)

    def _for(self, spec: TrainSpec, handle: dict[str, Any] | None = None) -> tuple[Clients, str, str]:
        handle = handle or {}
        clients = self.clients(handle.get("context") or spec.k8s.context, handle.get("kubeconfig"))
        namespace = check_label("namespace", handle.get("namespace") or namespace_for(spec, clients.namespace))
        name = check_label("job name", handle.get("name") or spec.name)
        return clients, namespace, name

    def _not_installed(self, clients: Clients) -> OperatorNotInstalledError:
        return OperatorNotInstalledError(
            f"the Kubernetes cluster at {clients.where()} does not serve {MPIJOB_PLURAL}.{MPIJOB_GROUP}/"
            f"{MPIJOB_VERSION}: the Kubeflow MPI Operator is not installed; {INSTALL_HINT}"
        )

    def _explain_404(self, clients: Clients, exc: ApiException, namespace: str) -> KubernetesError:
        """A 404 on mpijobs means: no such namespace, no MPI Operator, or no such job."""
        body = exc.body or ""
        if '"kind": "namespaces"' in body or '"kind":"namespaces"' in body:
            return KubernetesAPIError(f"namespace {namespace!r} does not exist on {clients.where()}", 404, body)
        try:
            resources = clients.call(clients.custom.get_api_resources, MPIJOB_GROUP, MPIJOB_VERSION,
                                     what="API discovery")
            served = {r.name for r in (resources.resources or [])}
        except ApiException:
            served = set()
        if MPIJOB_PLURAL not in served:
            return self._not_installed(clients)
        return KubernetesAPIError(f"not found on {clients.where()}: {exc.reason}", 404, body)

    def _get_job(self, clients: Clients, namespace: str, name: str, uid: str | None = None) -> dict[str, Any] | None:
        """The MPIJob named ``name``, or None when there is none; with ``uid`` (the handle's),
        None too when the name now belongs to another MPIJob: a teammate who reuses the name
        after ours is gone must never show up as our job (or be stopped as ours)."""
        job = self._get_named(clients, namespace, name)
        if job is None or _reused(job, uid):
            return None
        return job

    def _get_named(self, clients: Clients, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            job = clients.call(clients.custom.get_namespaced_custom_object, MPIJOB_GROUP, MPIJOB_VERSION,
                               namespace, MPIJOB_PLURAL, name, what=f"reading MPIJob {name}")
            return cast(dict[str, Any], job)  # custom objects are JSON dicts; the client types them "object"
        except ApiException as exc:
            if exc.status == 404:
                err = self._explain_404(clients, exc, namespace)
                if isinstance(err, OperatorNotInstalledError):
                    raise err from exc
                return None
            raise KubernetesAPIError(f"cannot read MPIJob {namespace}/{name}: {exc.status} {exc.reason}",
                                     exc.status, exc.body) from exc

    def _taken(self, clients: Clients, namespace: str, name: str, handle: dict[str, Any]) -> bool:
        """Whether the job's name now belongs to another MPIJob (so its pods are not ours)."""
        return bool(handle.get("uid")) and _reused(self._get_named(clients, namespace, name), handle.get("uid"))

    def openshift(self, spec: TrainSpec, clients: Clients | None = None) -> bool:
        """Whether ``spec``'s pods must pass the restricted policy: ``spec.k8s.openshift``, or when
        that is None, whether the cluster serves ``security.openshift.io`` (asked once per cluster)."""
        if spec.k8s.openshift is not None:
            return spec.k8s.openshift
        clients = clients or self._for(spec)[0]
        key = (clients.host, clients.context)
        if key not in self._openshift:
            self._openshift[key] = is_openshift(clients)
        return self._openshift[key]

    # ------------------------------------------------------------------ Backend API
    def render(self, spec: TrainSpec) -> str:
        return render(spec)

    def validate(self, spec: TrainSpec, run_dir: str | Path | None = None) -> None:
        """Everything that can be checked without the cluster (names, image): no request is sent."""
        build_mpijob(spec, str(run_dir) if run_dir else None)

    def submit(self, spec: TrainSpec, run_dir: str | Path | None = None) -> dict[str, Any]:
        """Create the MPIJob and return at once; ``run_dir`` is a path inside the cluster (or None:
        then under the first writable volume, see ``cluster_run_dir``). The handle keeps the
        context, kubeconfig and namespace, so ``get_job`` in another kernel finds the same job."""
        run_dir = str(run_dir) if run_dir else cluster_run_dir(spec)
        build_mpijob(spec, run_dir)  # validates names, paths and the image before any request
        clients, namespace, name = self._for(spec)
        # literal secrets go to a Secret of their own, never into the pod spec (see _create_env_secret)
        env_secret = env_secret_name(spec) if literal_secrets(spec) else None
        body = build_mpijob(spec, run_dir, namespace, openshift=self.openshift(spec, clients), env_secret=env_secret)
        submission = uuid.uuid4().hex
        body["metadata"]["annotations"][SUBMISSION_ANNOTATION] = submission
        try:
            created: dict[str, Any] | None = cast(dict[str, Any], clients.call(
                clients.custom.create_namespaced_custom_object, MPIJOB_GROUP, MPIJOB_VERSION, namespace, MPIJOB_PLURAL,
                body, what=f"creating MPIJob {name} in namespace {namespace}"))
        except ApiException as exc:
            if exc.status == 404:
                raise self._explain_404(clients, exc, namespace) from exc
            if exc.status == 409:
                existing = self._get_job(clients, namespace, name)
                ann = ((existing or {}).get("metadata") or {}).get("annotations") or {}
                if ann.get(SUBMISSION_ANNOTATION) != submission:  # not our own retried create
                    raise KubernetesAPIError(
                        f"an MPIJob named {name!r} already exists in namespace {namespace!r}: pick another name= "
                        f"or delete it (kubectl delete mpijob {name} -n {namespace})", 409, exc.body) from exc
                created = existing
            elif exc.status == 422:
                raise KubernetesAPIError(f"the cluster rejected the MPIJob: {exc.body}", 422, exc.body) from exc
            else:
                raise KubernetesAPIError(f"creating MPIJob {namespace}/{name} failed: {exc.status} {exc.reason}",
                                         exc.status, exc.body) from exc
        meta = (created or {}).get("metadata") or {}
        handle = {"namespace": namespace, "name": name, "uid": meta.get("uid"), "context": clients.context,
                  "kubeconfig": clients.kubeconfig, "run_dir": run_dir, "submitted": time.time()}
        if env_secret is not None:
            self._create_env_secret(clients, spec, namespace, created or {}, handle)
        if spec.k8s.network_policy:
            self._create_network_policy(clients, spec, namespace, created or {}, handle)
        return handle

    def _create_owned(self, clients: Clients, spec: TrainSpec, handle: dict[str, Any], body: dict[str, Any],
                      create: Any, kind: str, purpose: str, fix: Callable[[str, str], str]) -> None:
        """Create ``body``, an object owned by the MPIJob just made (deleted with it). When the
        cluster refuses it, the MPIJob is deleted again rather than run without it, and the error
        is ``fix(why, job)``: why (a name taken, a status) and what to do; the failed request's
        body is never chained (it may hold the values)."""
        name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
        try:
            clients.raw(create, namespace, body, what=f"creating {kind} {name} {purpose}")
        except (ApiException, KubernetesError) as exc:
            self._undo_submit(spec, handle)
            status = getattr(exc, "status", None)
            why = (f"a {kind} named {name!r} already exists in namespace {namespace!r}: delete it (kubectl delete "
                   f"{kind.lower()} {name} -n {namespace}) or pick another name=" if status == 409 else
                   f"{status} {exc.reason}" if isinstance(exc, ApiException) else str(exc))
            raise KubernetesAPIError(fix(why, f"MPIJob {namespace}/{spec.name}"), status, None) from None

    def _create_network_policy(self, clients: Clients, spec: TrainSpec, namespace: str, job: dict[str, Any],
                               handle: dict[str, Any]) -> None:
        """The NetworkPolicy that lets only the job's own pods reach them (``build_network_policy``),
        owned by the MPIJob just created. Created before the workers' sshd and the launcher's
        mpirun are up (image pulls, sshd, the init take seconds), so the rendezvous never opens
        unfenced on a cluster that enforces policies.

        Raises:
            KubernetesAPIError: the policy could not be made; the MPIJob is deleted again first.
        """
        self._create_owned(
            clients, spec, handle, build_network_policy(spec, namespace, job),
            clients.networking.create_namespaced_network_policy, "NetworkPolicy", "for the job's pods",
            lambda why, job: f"cannot fence the job's pods with a NetworkPolicy ({why}), so {job} was deleted again "
            "rather than run with its rendezvous open to any pod; the submitter needs 'create' on networkpolicies "
            "(deploy/rbac-submitter.yaml), or pass --no-network-policy (k8s={'network_policy': False}) where the "
            "cluster's own policies isolate jobs")

    def _undo_submit(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        """Delete the MPIJob a failed submit step leaves (its owned objects go with it)."""
        try:
            self.cancel(spec, handle)
        except KubernetesError:
            pass  # the caller's error is the one to see; the MPIJob then shows why its pods wait

    def _create_env_secret(self, clients: Clients, spec: TrainSpec, namespace: str, job: dict[str, Any],
                           handle: dict[str, Any]) -> None:
        """The Secret of the job's literal secrets (``HF_TOKEN=hf_...``), owned by the MPIJob just
        created, so the values never sit in the pod spec that everyone who may ``get pods`` or
        ``get mpijobs`` reads, and the Secret goes when the job is deleted. Created after the
        MPIJob (the owner's uid is needed); the pods wait for it as for any missing Secret.

        Raises:
            KubernetesAPIError: the Secret could not be made; the MPIJob is deleted again first.
        """
        names = ", ".join(sorted(literal_secrets(spec)))
        self._create_owned(
            clients, spec, handle, build_env_secret(spec, namespace, job), clients.core.create_namespaced_secret,
            "Secret", "for the job's secret env",
            lambda why, job: f"cannot keep the secret env variable(s) {names} in a Secret ({why}), so {job} was "
            "deleted again rather than run with them in clear; the submitter needs 'create' on secrets "
            "(deploy/rbac-submitter.yaml), or put them in a Secret yourself and pass -e NAME=secret:SECRET/KEY "
            "(env={'NAME': 'secret:SECRET/KEY'})")

    def _status_of(self, clients: Clients, namespace: str, name: str, job: dict[str, Any]) -> JobStatus:
        pods = pod_dicts(clients, namespace, name)
        status = mpijob_status(job, pods)
        if status.state.value == "pending":  # only then can a Warning event be the reason
            status = mpijob_status(job, pods, warning_events(clients, namespace, name, pods))
        return status

    def status(self, spec: TrainSpec, handle: dict[str, Any]) -> JobStatus:
        clients, namespace, name = self._for(spec, handle)
        job = self._get_named(clients, namespace, name)
        if job is None or _reused(job, handle.get("uid")):
            return missing_status(namespace, name, reused_by=_uid(job) if job is not None else None)
        return self._status_of(clients, namespace, name, job)

    def watch(self, spec: TrainSpec, handle: dict[str, Any], *, timeout: float | None = None
              ) -> Iterator[JobStatus]:
        """A ``JobStatus`` each time the MPIJob changes (a watch, not polling), until it is final:
        a deleted MPIJob ends the watch with its last final state, or LOST."""
        clients, namespace, name = self._for(spec, handle)
        for kind, obj in watch_mpijob(clients, namespace, name, timeout=timeout):
            if kind == "DELETED":
                last = mpijob_status(obj) if obj is not None else None
                yield last if last is not None and last.state.finished else missing_status(namespace, name)
                return
            assert obj is not None  # only DELETED comes without the object
            if _reused(obj, handle.get("uid")):  # ours was deleted and the name taken meanwhile
                yield missing_status(namespace, name, reused_by=_uid(obj))
                return
            status = self._status_of(clients, namespace, name, obj)
            yield status
            if status.state.finished:
                return

    def logs(self, spec: TrainSpec, handle: dict[str, Any], *, follow: bool = False,
             worker: int | None = None) -> Iterator[LogLine]:
        """The launcher's log (every rank's lines, tagged by mpirun); ``worker=N``: rank N's lines
        only, as on the local backend (a worker pod itself only runs sshd)."""
        lines = self._launcher_logs(spec, handle, follow=follow)  # redacted by the job layer (Job.logs)
        if worker is None:
            yield from lines
        else:
            yield from (line for line in lines if line.rank == worker)

    def _launcher_logs(self, spec: TrainSpec, handle: dict[str, Any], *, follow: bool) -> Iterator[LogLine]:
        clients, namespace, name = self._for(spec, handle)
        if self._taken(clients, namespace, name, handle):
            return  # the pods of that name are another job's
        pod = find_pod(clients, namespace, name)
        if not follow:
            if pod is None:
                return
            yield from to_log_lines(read_pod_lines(clients, namespace, pod["metadata"]["name"], "launcher"), "launcher")
            return
        # Following: wait for the pod to exist (it may still be pending), unless the job ends first.
        while pod is None:
            current = self.status(spec, handle)
            if current.state.finished or current.state.value in ("unknown", "suspended"):
                return
            time.sleep(0.2)
            pod = find_pod(clients, namespace, name)
        pod_name = pod["metadata"]["name"]

        def refresh() -> dict[str, Any] | None:
            return read_pod(clients, namespace, pod_name)

        yield from to_log_lines(follow_pod_lines(clients, namespace, pod_name, "launcher", refresh=refresh), "launcher")

    def read_log(self, spec: TrainSpec, handle: dict[str, Any], cursor: str | None, *,
                 max_lines: int = 5000, tail_lines: int | None = None) -> LogChunk:
        """The launcher pod's lines after a timestamp cursor (one non-follow log request)."""
        pos = StampCursor.decode(cursor)
        clients, namespace, name = self._for(spec, handle)
        pod = None if self._taken(clients, namespace, name, handle) else find_pod(clients, namespace, name)
        if pod is None:  # not created yet, deleted with the job, or the name is another job's now
            return LogChunk([], cursor, True)
        closed = container_terminated(pod)  # decided before reading, like the local backend
        read = read_pod_lines_after(clients, namespace, pod["metadata"]["name"], "launcher", pos,
                                    tail_lines=tail_lines)
        lines = list(to_log_lines_with_cursors(read, "launcher"))  # redacted by the job layer
        more = len(lines) > max_lines
        lines = lines[:max_lines]
        return LogChunk(lines, lines[-1][1] if lines else cursor, closed and not more)

    def capacity(self, spec: TrainSpec | None = None) -> dict[str, int]:
        """Allocatable ``nvidia.com/gpu`` over the cluster's nodes (one rank per GPU); a
        cluster without GPUs offers up to 64 CPU ranks."""
        clients = self.clients(spec.k8s.context if spec is not None else None)
        resp = clients.raw(clients.core.list_node, what="listing nodes",
                           _request_timeout=(5, 30))
        per_node = []
        for node in json.loads(resp.data).get("items") or []:
            alloc = ((node.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", "0")
            try:
                per_node.append(int(str(alloc)))
            except ValueError:
                per_node.append(0)
        total = sum(per_node)
        if total == 0:
            return {"processes": 64, "gpus": 0, "gpus_per_process": 0}
        return {"processes": total, "gpus": total, "gpus_per_process": max(per_node)}

    def datasets(self, spec: TrainSpec | None = None) -> list[str]:
        """Names of the PVCs in the spec's namespace (mount one to train on its data)."""
        clients = self.clients(spec.k8s.context if spec is not None else None)
        namespace = namespace_for(spec) if spec is not None else "default"
        resp = clients.raw(clients.core.list_namespaced_persistent_volume_claim, namespace,
                           what="listing PVCs", _request_timeout=(5, 30))
        return sorted(p["metadata"]["name"] for p in json.loads(resp.data).get("items") or [])

    def cancel(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        """Delete the MPIJob; Foreground propagation removes the pods before the job object.

        The delete carries the handle's uid as a precondition, so the API server itself refuses
        (409) to delete another MPIJob that took the name after ours was gone: ours is gone,
        which is what cancelling asked for, and theirs keeps running."""
        clients, namespace, name = self._for(spec, handle)
        uid = handle.get("uid")
        try:
            clients.delete_mpijob(namespace, name, uid)
        except ApiException as exc:
            if exc.status == 409 and uid:
                return  # the precondition failed: the name belongs to another MPIJob, ours is already gone
            if exc.status == 404:
                err = self._explain_404(clients, exc, namespace)
                if isinstance(err, OperatorNotInstalledError):
                    raise err from exc
                return  # already gone: cancelling twice is fine
            raise KubernetesAPIError(f"deleting MPIJob {namespace}/{name} failed: {exc.status} {exc.reason}",
                                     exc.status, exc.body) from exc

    def _set_suspend(self, spec: TrainSpec, handle: dict[str, Any], value: bool) -> None:
        clients, namespace, name = self._for(spec, handle)
        self._patch(clients, namespace, name, {"spec": {"runPolicy": {"suspend": value}}},
                    "suspending" if value else "resuming", uid=handle.get("uid"))

    def suspend(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        """``runPolicy.suspend: true``: the operator deletes the pods and keeps the job."""
        self._set_suspend(spec, handle, True)

    def resume(self, spec: TrainSpec, handle: dict[str, Any], *, from_checkpoint: bool = True) -> None:
        """Run a suspended job again; with ``from_checkpoint`` the trainer continues from
        ``<run_dir>/checkpoints/last.pt`` (``--resume``) instead of step 0.

        The operator starts a resumed launcher from its launcher Job's pod template, written when
        the job first started; so the MPIJob's launcher gets ``--resume`` and the old launcher
        Job is deleted (the operator re-creates it from the MPIJob) before un-suspending.
        """
        clients, namespace, name = self._for(spec, handle)
        job = self._get_job(clients, namespace, name, handle.get("uid"))
        if job is None:
            raise KubernetesAPIError(f"cannot resume MPIJob {namespace}/{name}: it no longer exists (or the name "
                                     "now belongs to another MPIJob)", 404)
        if not ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
            raise KubernetesAPIError(f"MPIJob {namespace}/{name} is not suspended: nothing to resume", 409)
        launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        containers = [dict(c) for c in launcher["containers"]]
        args = [a for a in containers[0].get("args") or [] if a != "--resume"]
        containers[0]["args"] = args + (["--resume"] if from_checkpoint else [])
        patch = {"spec": {"mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": containers}}}}}}
        self._patch(clients, namespace, name, patch, "setting --resume on", uid=handle.get("uid"))
        try:
            clients.call(clients.batch.delete_namespaced_job, f"{name}-launcher", namespace,
                         propagation_policy="Background", what=f"deleting the launcher Job of {name}")
        except ApiException as exc:
            if exc.status != 404:  # never created (suspended before the workers were ready): fine
                raise KubernetesAPIError(f"deleting Job {namespace}/{name}-launcher failed: {exc.status} "
                                         f"{exc.reason}", exc.status, exc.body) from exc
        self._set_suspend(spec, handle, False)

    def _patch(self, clients: Clients, namespace: str, name: str, patch: dict[str, Any], what: str, *,
               uid: str | None = None) -> None:
        """A merge patch; with ``uid`` it carries ``metadata.uid``, which the API server treats as a
        precondition (409 Conflict on another object of the same name), as its garbage collector does."""
        if uid:
            patch = {**patch, "metadata": {**(patch.get("metadata") or {}), "uid": uid}}
        try:
            clients.call(clients.custom.patch_namespaced_custom_object, MPIJOB_GROUP, MPIJOB_VERSION, namespace,
                         MPIJOB_PLURAL, name, patch, what=f"{what} MPIJob {name}")
        except ApiException as exc:
            if exc.status == 404:
                raise self._explain_404(clients, exc, namespace) from exc
            if exc.status == 409 and uid:
                raise KubernetesAPIError(f"{what} MPIJob {namespace}/{name} refused: that name now belongs to another "
                                         f"MPIJob (yours, uid {uid}, is gone)", 409, exc.body) from exc
            raise KubernetesAPIError(f"patching MPIJob {namespace}/{name} failed: {exc.status} {exc.reason}",
                                     exc.status, exc.body) from exc

    def describe(self, spec: TrainSpec, handle: dict[str, Any]) -> dict[str, Any]:
        clients, namespace, name = self._for(spec, handle)
        named = self._get_named(clients, namespace, name)
        job = None if _reused(named, handle.get("uid")) else named
        pods = pod_dicts(clients, namespace, name) if job is not None else []
        events = warning_events(clients, namespace, name, pods) if job is not None else []
        status = mpijob_status(job, pods, events) if job is not None else missing_status(
            namespace, name, reused_by=_uid(named) if named is not None else None)
        return {
            "backend": self.name,
            "server": clients.where(),
            "namespace": namespace,
            "name": name,
            "status": status.to_dict(),
            "conditions": ((job or {}).get("status") or {}).get("conditions") or [],
            "pods": [{"name": p["metadata"]["name"],
                      "role": (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-role"),
                      "phase": (p.get("status") or {}).get("phase"),
                      "node": (p.get("spec") or {}).get("nodeName")} for p in pods],
            "events": [{"reason": e.get("reason"), "object": (e.get("involvedObject") or {}).get("name"),
                        "message": e.get("message")} for e in events],
            "mpijob": redact_mpijob(job),
        }
