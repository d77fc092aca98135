"""The team's cluster at a glance: one list, then watches, of what a team view needs.

``TeamCollector`` keeps in memory, current through watches (``lanenb.kube.informer``): lanenb's
MPIJobs (label ``app.kubernetes.io/managed-by=lanenb``), the pods that have not finished, Warning
events (a quota's FailedCreate), ResourceQuotas and nodes. A ``view()`` is then computed from
memory (no request), so a sidebar that refreshes every few seconds costs the API server nothing
and the kernel a few milliseconds, however many jobs the team runs.

Scope: the whole cluster when we may list MPIJobs across namespaces; else each namespace asked
for (``namespaces=``), or the kubeconfig context's namespace plus ``$LANENB_TEAM_NAMESPACES``
(comma-separated). What RBAC refuses (403) is not an error: the view lists it (``unreadable``)
with what it means (no pending reasons without pods, no capacity without nodes). Whether we may
stop a job is asked of the API server (``SelfSubjectAccessReview``, delete on mpijobs in its
namespace) once per namespace per ``ACCESS_TTL_S``.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client as k8s

from lanenb.kube.access import can_i
from lanenb.kube.client import MPIJOB_GROUP, MPIJOB_PLURAL, MPIJOB_VERSION, Clients
from lanenb.kube.identity import submitter, user_label_value
from lanenb.kube.informer import Informer
from lanenb.kube.names import check_label
from lanenb.kube.objects import MANAGED_BY
from lanenb.kube.pods import JOB_NAME_LABEL
from lanenb.team.capacity import node_gpus, quota_use, running_ends, start_estimate
from lanenb.team.progress import ProgressReader
from lanenb.team.rows import TeamJob, team_job
from lanenb.team.view import TeamView, Unreadable

__all__ = ["TeamCollector", "MANAGED_SELECTOR", "ACTIVE_PODS", "ACCESS_TTL_S", "NAMESPACES_ENV", "IDLE_S",
           "default_namespaces"]

MANAGED_SELECTOR = f"app.kubernetes.io/managed-by={MANAGED_BY}"
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"  # what holds GPUs, or waits to
ACCESS_TTL_S = 300.0
IDLE_S = 600.0  # a collector nobody viewed for this long stops its watches
NAMESPACES_ENV = "LANENB_TEAM_NAMESPACES"
_MEANS = {
    "MPIJobs": "their jobs are not listed",
    "pods": "no pending reasons, GPU placement or allocation from their pods",
    "events": "no quota or admission reasons for pending jobs",
    "resourcequotas": "no quota figures",
    "nodes": "no GPU capacity by node",
}


def _own_clients(clients: Clients, connections: int) -> Clients:
    """A client of its own with a pool as large as the watches held open at once (the shared
    one's pool would drop and re-open connections under them)."""
    config = copy.copy(clients.api.configuration)
    config.connection_pool_maxsize = max(connections, 4)
    return Clients(k8s.ApiClient(config), clients.host, clients.context, clients.retry,
                   namespace=clients.namespace, kubeconfig=clients.kubeconfig, timeout=clients.timeout)


def default_namespaces(clients: Clients) -> list[str]:
    extra = [n.strip() for n in os.environ.get(NAMESPACES_ENV, "").split(",") if n.strip()]
    return list(dict.fromkeys([clients.namespace, *extra]))


class TeamCollector:
    """See the module docstring. ``start()`` lists (and with ``watch`` follows); ``view()`` reads.

    Args:
        clients: the cluster (``KubernetesBackend().clients()``).
        namespaces: only these namespaces (None: the cluster if readable, else the defaults).
        progress: read launchers' logs for progress, ETA, headline and GPU use.
        user: who "you" are (default: ``lanenb.kube.identity.submitter()``).
        progress_every_s: how often one job's log is read again (while watching).
        idle_s: stop watching after this long without a ``view()``.
    """

    def __init__(self, clients: Clients, namespaces: Sequence[str] | None = None, *, progress: bool = True,
                 user: str | None = None, progress_every_s: float = 10.0, idle_s: float = IDLE_S) -> None:
        self.clients, self.idle_s = clients, idle_s
        self.asked = [check_label("namespace", n) for n in namespaces] if namespaces else None
        self.user = user or submitter()
        self.me = frozenset({self.user, user_label_value(self.user)})
        self.scope = "namespaces"
        self.namespaces: list[str] = []
        self.informers: dict[tuple[str, str | None], Informer] = {}  # (kind, namespace or None)
        self.progress = ProgressReader(clients, every_s=progress_every_s) if progress else None
        self._access: dict[str, tuple[float, bool]] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watching = False
        self.changed = threading.Event()  # set by every watched change (a long poll may wait on it)
        self.started_at: float | None = None
        self._index_version: tuple[int, ...] = ()
        self._index: Any = ({}, {}, [], [])
        self._rows: dict[str, tuple[Any, TeamJob]] = {}  # uid -> (what it was computed from, the row)
        self._cluster_refused: str | None = None  # the API server's words when MPIJobs cannot be listed cluster-wide
        self.last_view: float = 0.0

    # ------------------------------------------------------------------ start / stop
    def start(self, *, watch: bool = True) -> TeamCollector:
        """List everything once (then, with ``watch``, follow watches and read progress in the
        background); one list per resource and scope, whatever the number of jobs."""
        cluster = self.asked is None and self._try_cluster()
        if not cluster:
            self.namespaces = self.asked or default_namespaces(self.clients)
            for ns in self.namespaces:
                self._add("MPIJobs", ns)
                for kind in ("pods", "events", "resourcequotas"):
                    self._add(kind, ns)
        self._add("nodes", None)
        if watch:
            self.clients = _own_clients(self.clients, len(self.informers) + 8)
            for informer in self.informers.values():
                informer.clients = self.clients
                informer.start()
            self._watching = True
            if self.progress is not None:
                self.progress.clients = self.clients
                self.read_progress()  # the first view shows progress too; then the loop keeps it current
                self._spawn(self._progress_loop, "lanenb-team-progress")
            self.last_view = time.monotonic()
            self._spawn(self._idle_loop, "lanenb-team-idle")
        elif self.progress is not None:
            self.read_progress()
        self.started_at = time.monotonic()
        return self

    def _try_cluster(self) -> bool:
        mpijobs = self._informer("MPIJobs", None).sync()
        if mpijobs.forbidden:
            self._cluster_refused = mpijobs.error or "403 Forbidden"
            return False
        self.scope, self.namespaces = "cluster", []
        self.informers[("MPIJobs", None)] = mpijobs
        for kind in ("pods", "events", "resourcequotas"):
            self._add(kind, None)
        return True

    def _informer(self, kind: str, ns: str | None) -> Informer:
        c, where = self.clients, f"in {ns}" if ns else "in all namespaces"
        on_change = self.changed.set
        if kind == "MPIJobs":
            if ns is None:
                return Informer(c, c.custom.list_cluster_custom_object, MPIJOB_GROUP, MPIJOB_VERSION, MPIJOB_PLURAL,
                                label_selector=MANAGED_SELECTOR, what=f"MPIJobs {where}", on_change=on_change)
            return Informer(c, c.custom.list_namespaced_custom_object, MPIJOB_GROUP, MPIJOB_VERSION, ns,
                            MPIJOB_PLURAL, label_selector=MANAGED_SELECTOR, what=f"MPIJobs {where}",
                            on_change=on_change)
        if kind == "nodes":
            return Informer(c, c.core.list_node, what="nodes", on_change=on_change)
        fields = {"pods": ACTIVE_PODS, "events": "type=Warning"}.get(kind)
        method = {("pods", True): "list_pod_for_all_namespaces", ("pods", False): "list_namespaced_pod",
                  ("events", True): "list_event_for_all_namespaces", ("events", False): "list_namespaced_event",
                  ("resourcequotas", True): "list_resource_quota_for_all_namespaces",
                  ("resourcequotas", False): "list_namespaced_resource_quota"}[(kind, ns is None)]
        fn: Callable[..., Any] = getattr(c.core, method)
        args = () if ns is None else (ns,)
        return Informer(c, fn, *args, field_selector=fields, what=f"{kind} {where}", on_change=on_change)

    def _add(self, kind: str, ns: str | None) -> None:
        self.informers[(kind, ns)] = self._informer(kind, ns).sync()

    def _spawn(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, daemon=True, name=name)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        """Stop every watch and the progress reader."""
        self._stop.set()
        for informer in self.informers.values():
            informer.stop()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=2)

    def _idle_loop(self) -> None:
        """Nobody looked for ``idle_s``: stop watching (the next view starts over with a list)."""
        while not self._stop.wait(min(30.0, self.idle_s / 4)):
            if time.monotonic() - self.last_view > self.idle_s:
                self.close()

    @property
    def watching(self) -> bool:
        return self._watching and not self._stop.is_set()

    # ------------------------------------------------------------------ progress
    def _progress_loop(self) -> None:
        assert self.progress is not None
        while not self._stop.wait(min(self.progress.every_s / 2, 2.0)):
            try:
                self.read_progress()
            except Exception:  # a progress pass that fails must not end the loop; the next one tries again
                continue

    def read_progress(self) -> int:
        """One pass of the progress reader over the jobs whose launcher runs or just ended."""
        if self.progress is None:
            return 0
        jobs = []
        for job in self._values("MPIJobs"):
            meta = job.get("metadata") or {}
            pods = self._job_pods().get((meta.get("namespace") or "", meta.get("name") or ""), [])
            launcher = [p for p in pods if (p["metadata"].get("labels") or {}).get(
                "training.kubeflow.org/job-role") == "launcher"]
            if launcher:
                pod = max(launcher, key=lambda p: p["metadata"].get("creationTimestamp") or "")
                finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                jobs.append((meta.get("uid") or "", meta.get("namespace") or "", pod["metadata"]["name"], "", finished))
        read = self.progress.read(jobs)
        if read:
            self.changed.set()
        return read

    # ------------------------------------------------------------------ reading
    def _values(self, kind: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for (k, _), informer in self.informers.items():
            if k == kind and informer.state == "ready":
                out += informer.values()
        return out

    def _job_pods(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        by_job: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for pod in self._values("pods"):
            meta = pod.get("metadata") or {}
            job = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
            if job:
                by_job[(meta.get("namespace") or "", job)].append(pod)
        return by_job

    def _events(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        by_object: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for event in sorted(self._values("events"), key=lambda e: e.get("lastTimestamp") or e.get("eventTime")
                            or ""):
            obj = event.get("involvedObject") or event.get("regarding") or {}
            by_object[((event.get("metadata") or {}).get("namespace") or "", obj.get("name") or "")].append(event)
        return by_object

    def _review(self, namespaces: set[str]) -> None:
        """Ask the access reviews that are due all at once (one request each, in parallel): a
        first view over ten namespaces waits for one round trip, not ten."""
        due = [ns for ns in namespaces if ns not in self._access
               or time.monotonic() - self._access[ns][0] >= ACCESS_TTL_S]
        if len(due) > 1:
            with ThreadPoolExecutor(min(8, len(due)), thread_name_prefix="lanenb-team-access") as pool:
                list(pool.map(self.can_cancel, due))

    def can_cancel(self, namespace: str) -> bool:
        """Whether we may delete MPIJobs in ``namespace`` (asked once per ``ACCESS_TTL_S``)."""
        cached = self._access.get(namespace)
        if cached is not None and time.monotonic() - cached[0] < ACCESS_TTL_S:
            return cached[1]
        allowed = can_i(self.clients, "delete", MPIJOB_PLURAL, group=MPIJOB_GROUP, namespace=namespace)
        self._access[namespace] = (time.monotonic(), allowed)
        return allowed

    def unreadable(self) -> list[Unreadable]:
        out = []
        if self._cluster_refused is not None:
            shown = ", ".join(self.namespaces)
            out.append(Unreadable("MPIJobs", None, f"only {shown} shown (more with --namespace NS or "
                                  f"${NAMESPACES_ENV})", self._cluster_refused))
        for (kind, ns), informer in self.informers.items():
            if informer.forbidden:
                out.append(Unreadable(kind, ns, _MEANS.get(kind, ""), informer.error or "403 Forbidden"))
        if self.progress is not None:
            out += [Unreadable("pod logs", ns, "no progress, ETA, accuracy or GPU use", message)
                    for ns, message in sorted(self.progress.forbidden.items())]
        return out

    def _indices(self) -> tuple[dict[tuple[str, str], list[dict[str, Any]]],
                                dict[tuple[str, str], list[dict[str, Any]]], list[Any], list[Any]]:
        """Pods by job, events by object, node GPUs and quota lines: rebuilt only when a watch
        brought a change since the last view (a refresh with no change reads them as they are)."""
        version = tuple(i.changes for i in self.informers.values())
        if version != self._index_version:
            self._index = (self._job_pods(), self._events(), node_gpus(self._values("nodes"), self._values("pods")),
                           quota_use(self._values("resourcequotas")))
            self._index_version = version
        return self._index

    def _row(self, job: dict[str, Any], pods_by_job: dict[tuple[str, str], list[dict[str, Any]]],
             events: dict[tuple[str, str], list[dict[str, Any]]]) -> TeamJob:
        """The row of one MPIJob, computed again only when it, its pods, their events or its
        progress changed (most rows of a big team stay as they were between two refreshes)."""
        meta = job.get("metadata") or {}
        ns, name, uid = meta.get("namespace") or "", meta.get("name") or "", meta.get("uid") or ""
        pods = pods_by_job.get((ns, name), [])
        about = [e for key in {name, f"{name}-launcher", *(p["metadata"]["name"] for p in pods)}
                 for e in events.get((ns, key), [])]
        state = self.progress.state(uid) if self.progress is not None else None
        key = (meta.get("resourceVersion"), tuple(p["metadata"].get("resourceVersion") for p in pods),
               tuple(e["metadata"].get("resourceVersion") for e in about),
               None if state is None else (state.lines_seen, state.state))
        cached = self._rows.get(uid)
        if cached is not None and cached[0] == key:
            return cached[1]
        row = team_job(job, pods, about, state, me=self.me)
        self._rows[uid] = (key, row)
        return row

    def view(self, now: float | None = None) -> TeamView:
        """The team view from memory: no request (but one access review per namespace per
        ``ACCESS_TTL_S`` for the Stop permission)."""
        now = time.time() if now is None else now
        self.last_view = time.monotonic()
        pods_by_job, events, nodes, quotas = self._indices()
        self._review({(j.get("metadata") or {}).get("namespace") or "" for j in self._values("MPIJobs")})
        rows: list[TeamJob] = []
        for job in self._values("MPIJobs"):
            row = self._row(job, pods_by_job, events)
            row.can_cancel = not row.final and self.can_cancel(row.namespace)
            rows.append(row)
        if len(self._rows) > 2 * len(rows) + 64:  # jobs deleted since: forget their rows
            keep = {r.uid for r in rows}
            self._rows = {u: v for u, v in self._rows.items() if u in keep}
        rows.sort(key=lambda r: (r.created or 0.0), reverse=True)
        nodes_read = self.informers[("nodes", None)].state == "ready"
        self._estimate(rows, sum(n.free for n in nodes) if nodes_read else None, quotas, now)
        partial = self.scope != "cluster" or any(i.forbidden for (k, _), i in self.informers.items() if k == "pods")
        return TeamView(self.user, self.scope, list(self.namespaces), rows, list(nodes), list(quotas),
                        self.unreadable(), partial_nodes=partial, now=now)

    @staticmethod
    def _estimate(rows: list[TeamJob], free: int | None, quotas: list[Any], now: float) -> None:
        ends = running_ends([r for r in rows if r.state == "running"], now)
        by_ns = {q.namespace: q for q in quotas}
        for row in rows:
            row.start_estimate = None
            if row.state == "pending":
                row.start_estimate = start_estimate(row, ends, free, now, by_ns.get(row.namespace))
