"""The ``kubernetes-fetch`` job backend: a dataset fetch ``batch/v1`` Job as a lanenb job.

Registered in :mod:`lanenb.contract.backends` like ``local`` and ``kubernetes``, so the generic job
layer (``Job.status/logs/poll/wait/cancel``, ``%lanejobs``, ``lanenb jobs``) runs a fetch Job
without knowing what it is. It reuses the Kubernetes backend's pieces: the clients with their
retries, the pod-log follow and timestamp cursor (``kubernetes/logs.py``), the pod problems in
plain words (``kubernetes/status.py``). Like every backend it keeps no per-job state: the
handle names the cluster, namespace and Job.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from lanenb.backends.fetch.objects import CONTAINER, build_fetch_job, create_fetch_objects
from lanenb.backends.fetch.spec import BACKEND, FetchSpec
from lanenb.contract.backend import Backend, LogChunk, LogLine
from lanenb.contract.redact import redact_data, redact_text
from lanenb.contract.spec import SpecError
from lanenb.contract.status import JobState, JobStatus
from lanenb.kube.client import ClientCache, Clients, KubernetesAPIError, RetryPolicy
from lanenb.kube.logs import (
    StampCursor,
    container_terminated,
    follow_pod_lines,
    read_pod,
    read_pod_lines,
    read_pod_lines_after,
)
from lanenb.kube.names import check_label
from lanenb.kube.pods import parse_time, pod_problem

__all__ = ["KubernetesFetchBackend", "fetch_status", "fetcher_error"]

POLL = 0.2  # seconds between looks while the pod is not there yet
SOURCE = "fetch"  # LogLine.source of the fetcher's lines


def fetcher_error(lines: list[str]) -> str | None:
    """The fetcher's own one-line error (``error: ...``, its last words before exit 2), if any."""
    return next((ln.strip() for ln in reversed(lines) if ln.strip().lower().startswith("error:")), None)


def fetch_status(job: dict[str, Any] | None, pods: list[dict[str, Any]], error_line: str | None = None,
                 *, where: str = "") -> JobStatus:
    """A ``batch/v1`` Job and its pods in plain words (the MPIJob mapping's rules, for one pod).

    Complete/Failed conditions first; then a deletion in progress (a cancel); then the newest
    pod: running, or pending with the reason it cannot start (missing PVC, image pull, ...).
    ``error_line`` (the fetcher's ``error: ...``) leads a failure's reason.
    """
    if job is None:
        return JobStatus(JobState.LOST, finished=time.time(),
                         reason=f"the fetch Job {where} no longer exists (deleted by someone else, or removed by "
                                "ttlSecondsAfterFinished) and its outcome was never seen; the PVC keeps what was "
                                "fetched and a new fetch resumes it")
    meta, st = job.get("metadata") or {}, job.get("status") or {}
    conds = {c.get("type"): c for c in st.get("conditions") or [] if str(c.get("status")) == "True"}
    started = parse_time(st.get("startTime"))
    pods = sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    ranks = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") or "Pending" for p in pods}
    exit_code = None
    for cs in ((pods[-1].get("status") or {}).get("containerStatuses") or []) if pods else []:
        term = (cs.get("state") or {}).get("terminated")
        if term and term.get("exitCode") is not None:
            exit_code = int(term["exitCode"])

    def make(state: JobState, reason: str | None, message: str | None = None, finished: float | None = None
             ) -> JobStatus:
        return JobStatus(state, reason=reason, message=message, started=started, finished=finished,
                         ranks=ranks, exit_code=exit_code)

    if "Complete" in conds:
        return make(JobState.SUCCEEDED, None, finished=parse_time(st.get("completionTime")))
    if "Failed" in conds:
        cond = conds["Failed"]
        why = f"{cond.get('reason') or 'Failed'}: {cond.get('message') or ''}".rstrip(": ")
        problem = pod_problem(pods[-1]) if pods else None
        reason = f"{error_line or problem or 'the fetcher failed'} ({why})"
        return make(JobState.FAILED, reason, cond.get("message"), parse_time(cond.get("lastTransitionTime")))
    if meta.get("deletionTimestamp"):
        return make(JobState.CANCELLED, "the fetch Job is being deleted (its pod is stopping)")
    if not pods:
        return make(JobState.PENDING, "waiting for the Job controller to create the fetch pod")
    pod = pods[-1]
    problem = pod_problem(pod)
    if (pod.get("status") or {}).get("phase") == "Running":
        return make(JobState.RUNNING, problem)
    return make(JobState.PENDING, problem or f"waiting for pod {pod['metadata']['name']} to start")


class KubernetesFetchBackend(Backend):
    """Submit/inspect/cancel dataset fetch Jobs (see :class:`~lanenb.backends.fetch.spec.FetchSpec`).

    ``context``/``kubeconfig`` choose the cluster (``spec.context`` wins); a job's handle keeps
    the context and kubeconfig it was sent with, so ``get_job`` in a new kernel finds it.
    """

    name = BACKEND

    def __init__(self, *, context: str | None = None, kubeconfig: str | os.PathLike[str] | None = None,
                 clients: Clients | None = None, retry: RetryPolicy | None = None) -> None:
        self._clients = ClientCache(context, kubeconfig, retry=retry, clients=clients)

    @classmethod
    def spec_from_dict(cls, data: Mapping[str, Any]) -> FetchSpec:
        return FetchSpec.from_dict(data)

    # ------------------------------------------------------------------ plumbing
    def clients(self, context: str | None = None, kubeconfig: str | None = None) -> Clients:
        return self._clients.get(context, kubeconfig)

    def _for(self, spec: FetchSpec, handle: Mapping[str, Any] | None = None) -> tuple[Clients, str, str]:
        handle = handle or {}
        clients = self.clients(handle.get("context") or spec.context, handle.get("kubeconfig"))
        namespace = check_label("namespace", handle.get("namespace") or spec.namespace or clients.namespace)
        return clients, namespace, check_label("job name", handle.get("name") or spec.name)

    @staticmethod
    def _check(spec: Any) -> FetchSpec:
        if not isinstance(spec, FetchSpec):
            raise SpecError("spec", type(spec).__name__, f"the {BACKEND} backend runs a FetchSpec "
                            "(lanenb.datasets.cluster.submit_fetch_job); train with backend='kubernetes'")
        return spec

    def _read_job(self, clients: Clients, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            resp = clients.raw(clients.batch.read_namespaced_job, name, namespace, what=f"reading Job {name}")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubernetesAPIError(f"cannot read Job {namespace}/{name}: {exc.status} {exc.reason}",
                                     exc.status, exc.body) from exc
        return json.loads(resp.data)

    @staticmethod
    def _pods(clients: Clients, namespace: str, name: str) -> list[dict[str, Any]]:
        """The Job's pods, oldest first (the Job controller labels them ``job-name=<job>``)."""
        resp = clients.raw(clients.core.list_namespaced_pod, namespace, label_selector=f"job-name={name}",
                           what="listing fetch pods", _request_timeout=(5, 30))
        pods = list(json.loads(resp.data).get("items") or [])
        return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")

    # ------------------------------------------------------------------ Backend API
    def validate(self, spec: Any, run_dir: str | Path | None = None) -> None:
        build_fetch_job(self._check(spec))

    def submit(self, spec: Any, run_dir: str | Path | None = None) -> dict[str, Any]:
        """Create (or reuse) the PVC and create the Job; returns at once."""
        spec = self._check(spec)
        clients, namespace, name = self._for(spec)
        created = create_fetch_objects(spec, clients, namespace)
        return {"namespace": namespace, "name": name, "uid": (created.get("metadata") or {}).get("uid"),
                "context": clients.context, "kubeconfig": clients.kubeconfig, "pvc": spec.pvc,
                "dataset_path": spec.dataset_path, "submitted": time.time()}

    def status(self, spec: Any, handle: dict[str, Any]) -> JobStatus:
        clients, namespace, name = self._for(self._check(spec), handle)
        job = self._read_job(clients, namespace, name)
        pods = self._pods(clients, namespace, name) if job is not None else []
        return self._status(clients, namespace, name, job, pods)

    @staticmethod
    def _status(clients: Clients, namespace: str, name: str, job: dict[str, Any] | None,
                pods: list[dict[str, Any]]) -> JobStatus:
        """The status from a Job and its pods already read (the failed pod's log is read here)."""
        error = None
        if job is not None and any(c.get("type") == "Failed" and str(c.get("status")) == "True"
                                   for c in (job.get("status") or {}).get("conditions") or []) and pods:
            error = fetcher_error(read_pod_lines(clients, namespace, pods[-1]["metadata"]["name"], CONTAINER)[-50:])
        return fetch_status(job, pods, redact_text(error) if error else error, where=f"{namespace}/{name}")

    def logs(self, spec: Any, handle: dict[str, Any], *, follow: bool = False,
             worker: int | None = None) -> Iterator[LogLine]:
        """The fetch pod's log (progress lines, then the result or the error); with ``follow``
        until the Job ends, across the pods of a retrying Job. ``worker`` is ignored: one pod."""
        clients, namespace, name = self._for(self._check(spec), handle)
        if not follow:
            pods = self._pods(clients, namespace, name)
            if pods:
                for text in read_pod_lines(clients, namespace, pods[-1]["metadata"]["name"], CONTAINER):
                    yield LogLine(None, redact_text(text), SOURCE)
            return
        followed: set[str] = set()
        while True:
            pods = [p for p in self._pods(clients, namespace, name) if p["metadata"]["name"] not in followed]
            if not pods:
                if self.status(spec, handle).state.finished:
                    return
                time.sleep(POLL)
                continue
            pod_name = pods[0]["metadata"]["name"]
            followed.add(pod_name)
            for text in follow_pod_lines(clients, namespace, pod_name, CONTAINER,
                                         refresh=functools.partial(read_pod, clients, namespace, pod_name)):
                yield LogLine(None, redact_text(text), SOURCE)

    def read_log(self, spec: Any, handle: dict[str, Any], cursor: str | None, *,
                 max_lines: int = 5000, tail_lines: int | None = None) -> LogChunk:
        """The newest pod's lines after a timestamp cursor (one non-follow log request)."""
        pos = StampCursor.decode(cursor)
        clients, namespace, name = self._for(self._check(spec), handle)
        pods = self._pods(clients, namespace, name)
        if not pods:
            return LogChunk([], cursor, True)
        pod = pods[-1]
        closed = container_terminated(pod)
        read = read_pod_lines_after(clients, namespace, pod["metadata"]["name"], CONTAINER, pos, tail_lines=tail_lines)
        lines = [(LogLine(None, redact_text(text), SOURCE), c) for text, c in read]  # presigned URLs echoed
        more = len(lines) > max_lines
        lines = lines[:max_lines]
        return LogChunk(lines, lines[-1][1] if lines else cursor, closed and not more)

    def cancel(self, spec: Any, handle: dict[str, Any]) -> None:
        """Delete the Job; Foreground propagation keeps it (deleting: CANCELLED) until its pod has
        stopped. The PVC and what it holds stay: a new fetch resumes the partial download."""
        clients, namespace, name = self._for(self._check(spec), handle)
        try:
            clients.raw(clients.batch.delete_namespaced_job, name, namespace, propagation_policy="Foreground",
                        what=f"deleting Job {name}")
        except ApiException as exc:
            if exc.status != 404:  # already gone: cancelling twice is fine
                raise KubernetesAPIError(f"deleting Job {namespace}/{name} failed: {exc.status} {exc.reason}",
                                         exc.status, exc.body) from exc

    def describe(self, spec: Any, handle: dict[str, Any]) -> dict[str, Any]:
        clients, namespace, name = self._for(self._check(spec), handle)
        job = self._read_job(clients, namespace, name)
        pods = self._pods(clients, namespace, name) if job is not None else []
        return {
            "backend": self.name, "server": clients.where(), "namespace": namespace, "name": name,
            "pvc": handle.get("pvc"), "dataset_path": handle.get("dataset_path"),
            "status": self._status(clients, namespace, name, job, pods).to_dict(),
            "conditions": ((job or {}).get("status") or {}).get("conditions") or [],
            "pods": [{"name": p["metadata"]["name"], "phase": (p.get("status") or {}).get("phase"),
                      "node": (p.get("spec") or {}).get("nodeName"), "problem": pod_problem(p)} for p in pods],
            "job": redact_data(job),  # the pod's args hold the urls/mirrors: presigned ones carry tokens
        }

    def datasets(self, spec: Any = None) -> list[str]:
        """The namespace's PVCs (as the ``kubernetes`` backend lists them for the picker)."""
        from lanenb.backends.fetch.objects import dataset_pvcs

        clients = self.clients(getattr(spec, "context", None))
        namespace = getattr(spec, "namespace", None) or clients.namespace
        return [p["name"] for p in dataset_pvcs(namespace, clients=clients)]
