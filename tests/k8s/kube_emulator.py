"""A Kubernetes API emulator over real HTTP, built on kmock 0.8, for the real ``kubernetes`` client.

Stock kmock (``KubernetesEmulator``) gets the client only part of the way: it 404s on the
client's trailing-slash discovery paths, answers creates with 200 (client 37 then drops the
body), stores objects without uid/resourceVersion/creationTimestamp/generateName, ignores
label/field selectors, has no PUT, no ``pods/NAME/log``, lists without ``kind``, and its
watch ignores ``timeoutSeconds`` and replays everything as ADDED. We keep kmock's HTTP
server, request parsing, discovery and error rendering, and replace the object store with a
small resourceVersion-ordered one that does what the apiserver does for the calls lanenb
makes. Faults (HTTP errors, dropped connections, 410 Gone) are injected per request.

The server runs in a background thread with its own event loop (kmock's async pytest
fixture deadlocks with the synchronous client).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import os
import random
import re
import string
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml

ResKey = tuple[str, str, str]  # (group, version, plural)

PODS: ResKey = ("", "v1", "pods")
PVCS: ResKey = ("", "v1", "persistentvolumeclaims")
SECRETS: ResKey = ("", "v1", "secrets")
NETWORK_POLICIES: ResKey = ("networking.k8s.io", "v1", "networkpolicies")
EVENTS: ResKey = ("", "v1", "events")
MPIJOBS: ResKey = ("kubeflow.org", "v2beta1", "mpijobs")
SNAPSHOTS: ResKey = ("snapshot.storage.k8s.io", "v1", "volumesnapshots")
NODES: ResKey = ("", "v1", "nodes")
JOBS: ResKey = ("batch", "v1", "jobs")
SNAPSHOT_CLASSES: ResKey = ("snapshot.storage.k8s.io", "v1", "volumesnapshotclasses")
STORAGE_CLASSES: ResKey = ("storage.k8s.io", "v1", "storageclasses")
NAMESPACES: ResKey = ("", "v1", "namespaces")
QUOTAS: ResKey = ("", "v1", "resourcequotas")
# Served without a store (answered from ``KubeEmulator.rbac``), as the apiserver's authorizer does.
ACCESS_REVIEWS: ResKey = ("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
# OpenShift's SecurityContextConstraints: installing it makes /apis list security.openshift.io,
# as an OpenShift API server does.
SCCS: ResKey = ("security.openshift.io", "v1", "securitycontextconstraints")

KINDS = {
    PODS: "Pod",
    PVCS: "PersistentVolumeClaim",
    SECRETS: "Secret",
    NETWORK_POLICIES: "NetworkPolicy",
    EVENTS: "Event",
    NAMESPACES: "Namespace",
    QUOTAS: "ResourceQuota",
    ("", "v1", "nodes"): "Node",
    MPIJOBS: "MPIJob",
    JOBS: "Job",
    SNAPSHOTS: "VolumeSnapshot",
    SNAPSHOT_CLASSES: "VolumeSnapshotClass",
    STORAGE_CLASSES: "StorageClass",
    SCCS: "SecurityContextConstraints",
}
CLUSTER_SCOPED = {NAMESPACES, ("", "v1", "nodes"), SNAPSHOT_CLASSES, STORAGE_CLASSES, SCCS}


def now_rfc3339(nano: bool = False) -> str:
    t = dt.datetime.now(dt.timezone.utc)
    if nano:
        return t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str, details: dict | None = None) -> aiohttp.web.Response:
    body = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "code": code, "reason": reason, "message": message, "details": details or {}}
    return aiohttp.web.json_response(body, status=code)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what the client sends for dict bodies)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict, ops: list[dict]) -> dict:
    """RFC 6902 subset (add/replace/remove) for list bodies."""
    result = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        node = result
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(node, list):
                node.insert(len(node) if last == "-" else int(last), op["value"]) if op["op"] == "add" \
                    else node.__setitem__(int(last), op["value"])
            else:
                node[last] = op["value"]
        elif op["op"] == "remove":
            del node[int(last) if isinstance(node, list) else last]
        else:
            raise ValueError(f"unsupported JSON patch op {op['op']!r}")
    return result


# ----------------------------------------------------------------------------- selectors
_SET_RE = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\((.*)\)\s*$")


def _split_selector(selector: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def label_match(selector: str | None, labels: dict[str, str]) -> bool:
    for req in _split_selector(selector or ""):
        m = _SET_RE.match(req)
        if m:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if (labels.get(key) in values) != (op == "in"):
                return False
        elif "!=" in req:
            key, value = (s.strip() for s in req.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in req:
            key, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif req.startswith("!"):
            if req[1:] in labels:
                return False
        elif req not in labels:
            return False
    return True


def field_match(selector: str | None, obj: dict) -> bool:
    for req in _split_selector(selector or ""):
        negate = "!=" in req
        key, value = (s.strip() for s in req.replace("==", "=").replace("!=", "=").split("=", 1))
        node: Any = obj
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if (str(node) == value if node is not None else value == "") == negate:
            return False
    return True


# ----------------------------------------------------------------------------- RBAC
@dataclass(frozen=True)
class Rule:
    """One RBAC PolicyRule as bound to a user: a Role's rule through a RoleBinding in each of
    ``namespaces``, or (``namespaces=None``) a ClusterRole's through a ClusterRoleBinding, which
    also covers requests across all namespaces and cluster-scoped resources such as nodes.
    ``resources`` are plurals, with ``/subresource`` for one (``pods/log``); ``"*"`` is every one.
    API groups are not told apart (no two resources lanenb reads share a plural)."""

    verbs: frozenset[str]
    resources: frozenset[str]
    namespaces: frozenset[str] | None = None

    @staticmethod
    def of(verbs: str, resources: str, namespaces: str | None = None) -> Rule:
        """``Rule.of("get list watch", "mpijobs pods", "team-a")``: space-separated words."""
        return Rule(frozenset(verbs.split()), frozenset(resources.split()),
                    None if namespaces is None else frozenset(namespaces.split()))

    def allows(self, verb: str, resource: str, namespace: str | None) -> bool:
        if not ({verb, "*"} & self.verbs and {resource, "*"} & self.resources):
            return False
        return self.namespaces is None or (namespace is not None and namespace in self.namespaces)


def _verb(method: str, name: str | None, params: Any) -> str:
    if method == "GET":
        return "watch" if params.get("watch") in ("true", "1") else "get" if name else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())


def _forbidden(user: str, verb: str, key: ResKey, sub: str | None, namespace: str | None) -> aiohttp.web.Response:
    """The apiserver's 403 wording (``kubectl auth can-i`` users know it)."""
    group, _, plural = key
    resource = f"{plural}/{sub}" if sub else plural
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    qualified = f"{plural}.{group}" if group else plural
    return _status(403, "Forbidden", f'{qualified} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
                   f'in API group "{group}" {where}', {"group": group, "kind": plural})


# ----------------------------------------------------------------------------- logs and faults
@dataclass
class PodLog:
    """The output of one container, with the kubelet's RFC 3339 timestamps."""

    lines: list[tuple[str, str]] = field(default_factory=list)  # (timestamp, text)
    done: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def append(self, text: str) -> None:
        self.lines.append((now_rfc3339(nano=True), text))
        self.changed.set()

    def close(self) -> None:
        self.done = True
        self.changed.set()


@dataclass
class Fault:
    """Answer the next ``times`` matching requests with ``status`` (or drop the connection)."""

    match: Callable[[kmock.Request], bool]
    status: int = 500
    times: int = 1
    drop_after_lines: int | None = None  # for streams: cut the TCP connection after N lines
    message: str = "injected fault"
    delay: float = 0.0  # seconds to stall before answering (a black-holed apiserver); status 0 = then serve


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesScaffold):
    """kmock's scaffold (discovery, errors) with an apiserver-like object store on top."""

    store: dict[ResKey, dict[tuple[str | None, str], dict]] = attrs.field(factory=dict)
    history: list[tuple[int, ResKey, str, dict]] = attrs.field(factory=list)  # (rv, res, type, obj)
    rv: int = 1000
    compacted_rv: int = 0
    logs: dict[tuple[str, str, str], PodLog] = attrs.field(factory=dict)  # (ns, pod, container)
    faults: list[Fault] = attrs.field(factory=list)
    hooks: list[Callable[[str, ResKey, dict], Awaitable[None] | None]] = attrs.field(factory=list)
    served: list[tuple[str, str]] = attrs.field(factory=list)  # (method, path+query), for assertions
    # Bearer token -> user. When set, a request with another (or no) token gets 401, and
    # ``served_as`` records (user, method, path) so tests can check what an identity did.
    tokens: dict[str, str] | None = None
    served_as: list[tuple[str, str, str]] = attrs.field(factory=list)
    # User -> the RBAC rules bound to them (with ``tokens``). None: every user may do everything;
    # a user with no entry may do nothing, as a fresh account with no bindings. A refused request
    # gets the apiserver's 403; SelfSubjectAccessReviews are answered from the same rules.
    rbac: dict[str, list[Rule]] | None = None
    # Stock kmock's watch: every watch starts by replaying all objects as ADDED, whatever the
    # resourceVersion. Off by default; on, it checks that clients drop what they already saw.
    replay_all_on_watch: bool = False
    # Pods on a node are removed only once their kubelet confirms (``finish_pod_deletion``), as
    # the apiserver keeps them with a deletionTimestamp during the grace period. Off: at once.
    graceful_pods: bool = False
    _changed: asyncio.Event | None = attrs.field(default=None)
    _flock: threading.Lock = attrs.field(factory=threading.Lock)

    def install(self, res: ResKey) -> None:
        """Declare a resource (a built-in or a CRD) so it is served and discoverable."""
        self.store.setdefault(res, {})
        group, version, plural = res
        key = f"{group}/{version}/{plural}" if group else f"{version}/{plural}"
        self.resources[key].kind = KINDS.get(res, plural.capitalize())
        self.resources[key].namespaced = res not in CLUSTER_SCOPED
        self.resources[key].verbs = {"get", "list", "watch", "create", "update", "patch", "delete"}

    # ------------------------------------------------------------------ in-loop state API
    def _bump(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _notify(self, kind: str, res: ResKey, obj: dict) -> None:
        self.history.append((int(obj["metadata"]["resourceVersion"]), res, kind, copy.deepcopy(obj)))
        if self._changed is None:
            self._changed = asyncio.Event()
        self._changed.set()
        self._changed = asyncio.Event()
        for hook in self.hooks:
            result = hook(kind, res, copy.deepcopy(obj))
            if asyncio.iscoroutine(result):
                asyncio.get_running_loop().create_task(result)

    def get(self, res: ResKey, namespace: str | None, name: str) -> dict | None:
        obj = self.store.get(res, {}).get((namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, res: ResKey, namespace: str | None = None, labels: str | None = None) -> list[dict]:
        return [copy.deepcopy(o) for (ns, _), o in sorted(self.store.get(res, {}).items(), key=lambda kv: kv[0][1])
                if (namespace is None or ns == namespace) and label_match(labels, o["metadata"].get("labels", {}))]

    def create(self, res: ResKey, namespace: str | None, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        if res not in CLUSTER_SCOPED:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        key = (meta.get("namespace"), meta["name"])
        if key in self.store[res]:
            raise FileExistsError(meta["name"])
        group, version, plural = res
        obj.setdefault("apiVersion", f"{group}/{version}" if group else version)
        obj.setdefault("kind", KINDS.get(res, plural.capitalize()))
        meta.update(uid=str(uuid.uuid4()), resourceVersion=self._bump(), creationTimestamp=now_rfc3339(), generation=1)
        self.store[res][key] = obj
        self._notify("ADDED", res, obj)
        return copy.deepcopy(obj)

    def replace(self, res: ResKey, namespace: str | None, name: str, new: dict, *, status_only: bool = False) -> dict:
        old = self.store[res][(namespace, name)]
        new = copy.deepcopy(new)
        if status_only:
            merged = copy.deepcopy(old)
            merged["status"] = new.get("status", {})
            new = merged
        else:
            new["status"] = new.get("status", old.get("status"))
            if new.get("spec") != old.get("spec"):
                new.setdefault("metadata", {})["generation"] = old["metadata"].get("generation", 1) + 1
        for k in ("uid", "creationTimestamp", "namespace", "name"):
            if k in old["metadata"]:
                new.setdefault("metadata", {})[k] = old["metadata"][k]
        new.setdefault("apiVersion", old.get("apiVersion"))
        new.setdefault("kind", old.get("kind"))
        new["metadata"]["resourceVersion"] = self._bump()
        self.store[res][(namespace, name)] = new
        self._notify("MODIFIED", res, new)
        return copy.deepcopy(new)

    def patch(self, res: ResKey, namespace: str | None, name: str, patch: Any, *, status_only: bool = False) -> dict:
        old = self.store[res][(namespace, name)]
        new = json_patch(old, patch) if isinstance(patch, list) else merge_patch(old, patch)
        return self.replace(res, namespace, name, new, status_only=status_only)

    def delete(self, res: ResKey, namespace: str | None, name: str, policy: str = "Background",
               grace_seconds: int | None = None) -> dict:
        """Delete as the apiserver and its garbage collector do. An object with finalizers, a
        Foreground deletion with dependents, or (``graceful_pods``) a pod on a node is only marked
        (``deletionTimestamp``, MODIFIED) and removed once nothing holds it any more; Background
        removes it at once and then its dependents (``ownerReferences``). A pod's grace period is
        ``grace_seconds`` (DeleteOptions ``gracePeriodSeconds``), else its
        ``terminationGracePeriodSeconds`` (default 30); 0 is a force delete: the object goes at once
        and the kubelet kills what it finds left (``kubectl delete --grace-period=0 --force``)."""
        obj = self.store[res][(namespace, name)]
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and grace_seconds != 0:
            return copy.deepcopy(obj)
        if res == PODS and grace_seconds == 0:
            return self._remove(res, namespace, name)
        foreground = policy == "Foreground" and bool(self._dependents(meta["uid"]))
        if foreground or meta.get("finalizers") or self._kubelet_holds(res, obj):
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = 0 if res != PODS else (
                grace_seconds if grace_seconds is not None else int(obj.get("spec", {}).get(
                    "terminationGracePeriodSeconds", 30)))
            if foreground:
                meta["finalizers"] = [*meta.get("finalizers", []), "foregroundDeletion"]
            meta["resourceVersion"] = self._bump()
            self._notify("MODIFIED", res, obj)
            if foreground:
                for dep_res, ns, dep_name in self._dependents(meta["uid"]):
                    if (ns, dep_name) in self.store[dep_res]:
                        self.delete(dep_res, ns, dep_name, "Foreground")  # the whole tree, bottom up
            self._collect(res, namespace, name)
            return copy.deepcopy(self.store[res].get((namespace, name), obj))
        return self._remove(res, namespace, name)

    def _kubelet_holds(self, res: ResKey, obj: dict) -> bool:
        return (self.graceful_pods and res == PODS and bool(obj.get("spec", {}).get("nodeName"))
                and obj.get("status", {}).get("phase") in ("Running", "Pending"))

    def _dependents(self, uid: str) -> list[tuple[ResKey, str | None, str]]:
        return [(r, ns, n) for r, objs in self.store.items() for (ns, n), o in objs.items()
                if any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences", []))]

    def _collect(self, res: ResKey, namespace: str | None, name: str) -> None:
        """Finish a pending deletion once its dependents are gone and no finalizer is left."""
        obj = self.store[res].get((namespace, name))
        if obj is None or not obj["metadata"].get("deletionTimestamp"):
            return
        meta = obj["metadata"]
        if "foregroundDeletion" in meta.get("finalizers", []) and not self._dependents(meta["uid"]):
            meta["finalizers"] = [f for f in meta["finalizers"] if f != "foregroundDeletion"]
            if not meta["finalizers"]:
                del meta["finalizers"]
        if not meta.get("finalizers") and not self._kubelet_holds(res, obj):
            self._remove(res, namespace, name)

    def finish_pod_deletion(self, namespace: str, name: str) -> None:
        """The kubelet has stopped the pod's containers: a pending pod deletion completes."""
        if (namespace, name) in self.store[PODS]:
            self._remove(PODS, namespace, name)

    def _remove(self, res: ResKey, namespace: str | None, name: str) -> dict:
        obj = self.store[res].pop((namespace, name))
        obj["metadata"]["resourceVersion"] = self._bump()
        self._notify("DELETED", res, obj)
        for dep_res, ns, dep_name in self._dependents(obj["metadata"]["uid"]):  # background garbage collection
            if (ns, dep_name) in self.store[dep_res]:
                self.delete(dep_res, ns, dep_name, "Background")
        for ref in obj["metadata"].get("ownerReferences", []):  # an owner waiting in foreground deletion
            for owner_res, objs in self.store.items():
                for (ons, oname), owner in list(objs.items()):
                    if owner["metadata"]["uid"] == ref.get("uid"):
                        self._collect(owner_res, ons, oname)
        return obj

    def record_event(self, namespace: str, involved: dict, reason: str, message: str, type_: str = "Warning",
                     component: str = "mpi-job-controller") -> dict:
        """An Event about ``involved`` (an object of the store), as controllers record them."""
        meta = involved["metadata"]
        return self.create(EVENTS, namespace, {
            "metadata": {"generateName": f"{meta['name']}."},
            "involvedObject": {"kind": involved.get("kind"), "name": meta["name"], "namespace": namespace,
                               "uid": meta.get("uid"), "apiVersion": involved.get("apiVersion")},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "source": {"component": component}, "firstTimestamp": now_rfc3339(), "lastTimestamp": now_rfc3339()})

    def pod_log(self, namespace: str, pod: str, container: str) -> PodLog:
        return self.logs.setdefault((namespace, pod, container), PodLog())

    # ------------------------------------------------------------------ faults (thread-safe)
    def add_fault(self, fault: Fault) -> None:
        with self._flock:
            self.faults.append(fault)

    def _take_fault(self, request: kmock.Request) -> Fault | None:
        with self._flock:
            for fault in self.faults:
                if fault.times > 0 and fault.match(request):
                    fault.times -= 1
                    return fault
        return None

    # ------------------------------------------------------------------ HTTP
    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        path = raw_request.rel_url.path
        if path != "/" and path.endswith("/"):
            # The client asks /version/, /apis/, /api/v1/: serve them as their slash-less twins.
            raw_request = raw_request.clone(rel_url=raw_request.rel_url.with_path(path.rstrip("/")))
        return await super().__call__(raw_request)

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        self.served.append((request.method.value, str(request.url.path_qs)))
        user: str | None = None
        if self.tokens is not None:
            auth = request.headers.get("Authorization", "")
            user = self.tokens.get(auth[len("Bearer "):]) if auth.startswith("Bearer ") else None
            if user is None:
                return _status(401, "Unauthorized", "Unauthorized")
            self.served_as.append((user, request.method.value.upper(), request.url.path))
        if os.environ.get("KUBE_EMULATOR_TRACE"):
            print(f"{time.time():.3f} {request.method.value} {request.url.path_qs}", flush=True)
        fault = self._take_fault(request)
        if fault is not None and fault.delay:
            await asyncio.sleep(fault.delay)
            if fault.status == 0:
                fault = None
        is_watch = request.params.get("watch") in ("true", "1")
        if fault is not None and fault.drop_after_lines is None and not (fault.status == 410 and is_watch):
            return _status(fault.status, "InternalError" if fault.status >= 500 else "TooManyRequests"
                           if fault.status == 429 else "Injected", fault.message)
        if request.url.path == "/api/v1":  # kmock answers groupVersion "/v1" for the core group
            return aiohttp.web.json_response({
                "apiVersion": "v1", "kind": "APIResourceList", "groupVersion": "v1",
                "resources": [{"name": plural, "kind": KINDS.get((g, v, plural), plural.capitalize()),
                               "namespaced": (g, v, plural) not in CLUSTER_SCOPED, "singularName": "",
                               "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}
                              for (g, v, plural) in self.store if g == ""]})
        res = request.resource
        if res is None or not res.plural:
            return await super()._handle(request)
        key: ResKey = (res.group or "", res.version or "", res.plural)
        if key == ACCESS_REVIEWS and request.method.value.upper() == "POST":
            return self._access_review(user, request)
        if self.rbac is not None and user is not None:
            verb = _verb(request.method.value.upper(), request.name, request.params)
            scope = None if key in CLUSTER_SCOPED else request.namespace
            resource = f"{key[2]}/{request.subresource}" if request.subresource else key[2]
            if not self.allowed(user, verb, resource, scope):
                return _forbidden(user, verb, key, request.subresource, scope)
        if key not in self.store:
            return _status(404, "NotFound", "the server could not find the requested resource")
        try:
            return await self._serve(key, request, fault)
        except KeyError:
            group = f".{key[0]}" if key[0] else ""
            return _status(404, "NotFound", f'{key[2]}{group} "{request.name}" not found',
                           {"name": request.name, "group": key[0], "kind": key[2]})
        except FileExistsError as exc:
            group = f".{key[0]}" if key[0] else ""
            return _status(409, "AlreadyExists", f'{key[2]}{group} "{exc.args[0]}" already exists',
                           {"name": exc.args[0], "group": key[0], "kind": key[2]})

    async def _serve(self, key: ResKey, request: kmock.Request, fault: Fault | None) -> aiohttp.web.StreamResponse:
        method, ns, name, sub = request.method.value.upper(), request.namespace, request.name, request.subresource
        params = request.params
        if key in CLUSTER_SCOPED:
            ns = None
        if method == "GET" and params.get("watch") in ("true", "1"):
            return await self._watch(key, request, fault)
        if method == "GET" and name is None:
            items = [o for o in self.list(key, ns, params.get("labelSelector"))
                     if field_match(params.get("fieldSelector"), o)]
            group, version, plural = key
            return aiohttp.web.json_response({
                "apiVersion": f"{group}/{version}" if group else version,
                "kind": KINDS.get(key, plural.capitalize()) + "List",
                "metadata": {"resourceVersion": str(self.rv)},
                "items": items,
            })
        if method == "GET" and sub == "log":
            return await self._log(key, request, fault)
        if method == "GET":
            obj = self.get(key, ns, name)  # type: ignore[arg-type]
            if obj is None:
                raise KeyError(name)
            return aiohttp.web.json_response(obj)
        if method == "POST" and name is None:
            if not isinstance(request.data, dict):
                return _status(400, "BadRequest", "the request body must be a JSON object")
            meta = request.data.get("metadata") or {}
            if not meta.get("name") and not meta.get("generateName"):
                return _status(422, "Invalid", "metadata.name or metadata.generateName is required")
            created = self.create(key, ns, request.data)
            if fault is not None and fault.drop_after_lines is not None:
                # Done, but the answer is lost: the client sees a dropped connection and retries.
                request._raw_request.transport.close()  # type: ignore[union-attr]
            return aiohttp.web.json_response(created, status=201)
        if method in ("PUT", "PATCH"):
            if (ns, name) not in self.store[key]:
                raise KeyError(name)
            sent_uid = ((request.data.get("metadata") if isinstance(request.data, dict) else None) or {}).get("uid")
            conflict = self._uid_conflict(key, ns, name, sent_uid)
            if conflict is not None:
                return conflict
            status_only = sub == "status"
            if method == "PUT":
                sent_rv = (request.data.get("metadata") or {}).get("resourceVersion")
                current = self.store[key][(ns, name)]["metadata"]["resourceVersion"]
                if sent_rv and sent_rv != current:
                    return _status(409, "Conflict", f'Operation cannot be fulfilled on {key[2]} "{name}": '
                                   "the object has been modified; please apply your changes to the latest version")
                return aiohttp.web.json_response(self.replace(key, ns, name, request.data, status_only=status_only))  # type: ignore[arg-type]
            return aiohttp.web.json_response(self.patch(key, ns, name, request.data, status_only=status_only))  # type: ignore[arg-type]
        if method == "DELETE" and name is not None:
            if (ns, name) not in self.store[key]:
                raise KeyError(name)
            body = request.data if isinstance(request.data, dict) else {}
            preconditions = body.get("preconditions") or {}
            conflict = self._uid_conflict(key, ns, name, preconditions.get("uid"))
            if conflict is not None:
                return conflict
            sent_rv = preconditions.get("resourceVersion")
            if sent_rv and sent_rv != self.store[key][(ns, name)]["metadata"]["resourceVersion"]:
                return _status(409, "Conflict", f'Operation cannot be fulfilled on {key[2]} "{name}": Precondition '
                               f"failed: ResourceVersion in precondition: {sent_rv}, ResourceVersion in object meta: "
                               f'{self.store[key][(ns, name)]["metadata"]["resourceVersion"]}')
            policy = params.get("propagationPolicy") or body.get("propagationPolicy") or "Background"
            grace = params.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
            obj = self.delete(key, ns, name, policy, None if grace is None else int(grace))
            obj.setdefault("metadata", {})["annotations"] = {
                **obj["metadata"].get("annotations", {}), "emulator/propagationPolicy": policy}
            return aiohttp.web.json_response(obj)
        return _status(405, "MethodNotAllowed", f"{method} is not supported on {request.url.path}")

    def allowed(self, user: str | None, verb: str, resource: str, namespace: str | None) -> bool:
        """Whether ``user``'s rules allow ``verb`` on ``resource`` (``pods/log`` for a subresource)
        in ``namespace`` (None: across namespaces, or a cluster-scoped resource)."""
        if self.rbac is None or user is None:
            return True
        return any(rule.allows(verb, resource, namespace) for rule in self.rbac.get(user, []))

    def _access_review(self, user: str | None, request: kmock.Request) -> aiohttp.web.Response:
        """``SelfSubjectAccessReview``: what ``kubectl auth can-i`` asks, answered from ``rbac``."""
        body = request.data if isinstance(request.data, dict) else {}
        attrs_ = (body.get("spec") or {}).get("resourceAttributes") or {}
        resource = attrs_.get("resource") or ""
        if attrs_.get("subresource"):
            resource += "/" + attrs_["subresource"]
        ok = self.allowed(user, attrs_.get("verb") or "", resource, attrs_.get("namespace") or None)
        return aiohttp.web.json_response({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
            "spec": body.get("spec") or {},
            "status": {"allowed": ok, **({} if ok else {"reason": "no RBAC rule allows it"})}}, status=201)

    def _uid_conflict(self, key: ResKey, ns: str | None, name: str, uid: str | None) -> aiohttp.web.Response | None:
        """As the apiserver: a uid in DeleteOptions.preconditions, or in the metadata of a PUT or
        PATCH, that is not the stored object's is a 409 Conflict and nothing changes."""
        current = self.store[key][(ns, name)]["metadata"].get("uid")
        if not uid or uid == current:
            return None
        return _status(409, "Conflict", f'Operation cannot be fulfilled on {key[2]} "{name}": Precondition failed: '
                       f"UID in precondition: {uid}, UID in object meta: {current}")

    async def _watch(self, key: ResKey, request: kmock.Request, fault: Fault | None) -> aiohttp.web.StreamResponse:
        params = request.params
        ns = None if key in CLUSTER_SCOPED else request.namespace
        labels, fields = params.get("labelSelector"), params.get("fieldSelector")
        timeout = float(params.get("timeoutSeconds") or 3600)
        since = params.get("resourceVersion")
        resp = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request._raw_request)
        sent = 0

        def visible(obj: dict) -> bool:
            meta = obj["metadata"]
            return ((ns is None or meta.get("namespace") == ns) and label_match(labels, meta.get("labels", {}))
                    and field_match(fields, obj) and (request.name is None or meta["name"] == request.name))

        async def send(event: dict) -> bool:
            nonlocal sent
            if fault is not None and fault.drop_after_lines is not None and sent >= fault.drop_after_lines:
                request._raw_request.transport.close()  # type: ignore[union-attr]
                return False
            await resp.write(json.dumps(event).encode() + b"\n")
            sent += 1
            return True

        if (fault is not None and fault.status == 410) or (since and since != "0" and int(since) < self.compacted_rv):
            await send({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                    "code": 410, "reason": "Expired",
                                                    "message": f"too old resource version: {since} "
                                                               f"({self.compacted_rv})"}})
            await resp.write_eof()
            return resp
        if since and since != "0" and not self.replay_all_on_watch:
            cursor = int(since)
        else:  # no resourceVersion: the current state as synthetic ADDED events, then changes
            cursor = self.rv
            for obj in self.list(key, ns):
                if visible(obj) and not await send({"type": "ADDED", "object": obj}):
                    return resp
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for rv, res, kind, obj in [h for h in self.history if h[0] > cursor]:
                cursor = rv
                if res == key and visible(obj) and not await send({"type": kind, "object": obj}):
                    return resp
            if self._changed is None:
                self._changed = asyncio.Event()
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=min(left, 1.0))
            except asyncio.TimeoutError:
                pass
        await resp.write_eof()
        return resp

    async def _log(self, key: ResKey, request: kmock.Request, fault: Fault | None) -> aiohttp.web.StreamResponse:
        params = request.params
        pod = self.get(PODS, request.namespace, request.name)  # type: ignore[arg-type]
        if pod is None:
            raise KeyError(request.name)
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        container = params.get("container") or (containers[0] if len(containers) == 1 else None)
        if container is None:
            return _status(400, "BadRequest", f"a container name must be specified for pod {request.name}, "
                           f"choose one of: {containers}")
        if container not in containers:
            return _status(400, "BadRequest", f"container {container} is not valid for pod {request.name}")
        for cs in pod.get("status", {}).get("containerStatuses", []):
            waiting = cs.get("state", {}).get("waiting")
            if cs.get("name") == container and waiting:
                return _status(400, "BadRequest", f'container "{container}" in pod "{request.name}" is waiting '
                               f"to start: {waiting.get('reason', 'ContainerCreating')}")
        log = self.pod_log(request.namespace or "default", request.name or "", container)  # type: ignore[arg-type]
        follow = params.get("follow") in ("true", "1")
        stamps = params.get("timestamps") in ("true", "1")
        since_time = params.get("sinceTime")
        if params.get("sinceSeconds"):
            cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=int(params["sinceSeconds"]))
            since_time = cutoff.strftime("%Y-%m-%dT%H:%M:%S")
        tail = int(params["tailLines"]) if params.get("tailLines") else None
        resp = aiohttp.web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request._raw_request)
        index = 0
        if tail is not None:
            index = max(0, len(log.lines) - tail)
        sent = 0
        while True:
            while index < len(log.lines):
                ts, text = log.lines[index]
                index += 1
                if since_time and ts[:19] < since_time[:19]:  # the kubelet compares at second resolution
                    continue
                if fault is not None and fault.drop_after_lines is not None and sent >= fault.drop_after_lines:
                    request._raw_request.transport.close()  # type: ignore[union-attr]
                    return resp
                await resp.write(((ts + " ") if stamps else "").encode() + text.encode() + b"\n")
                sent += 1
            if not follow or log.done:
                break
            log.changed.clear()
            if index >= len(log.lines) and not log.done:
                try:
                    await asyncio.wait_for(log.changed.wait(), timeout=1.0)
                except asyncio.TimeoutError:
                    pass
        await resp.write_eof()
        return resp


# ----------------------------------------------------------------------------- server thread
class EmulatorThread:
    """Runs a ``KubeEmulator`` behind ``kmock.Server`` in a thread with its own event loop."""

    def __init__(self, emulator: KubeEmulator | None = None) -> None:
        self.emulator = emulator if emulator is not None else KubeEmulator()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="kube-emulator", daemon=True)
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.url = ""
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self.emulator._changed = asyncio.Event()
        async with self.emulator, kmock.Server(self.emulator) as server:
            self.url = f"http://{server.host}:{server.port}"
            self._ready.set()
            await self._stop.wait()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    def start(self) -> EmulatorThread:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None or not self.url:
            raise RuntimeError(f"the Kubernetes emulator did not start: {self._error!r}")
        return self

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` on the emulator's loop (its state is not thread-safe) and return its result."""

        async def runner() -> Any:
            result = fn(*args, **kwargs)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(runner(), self.loop).result(timeout=30)

    def stop(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def write_kubeconfig(self, path: Path, *, context: str = "emulator", namespace: str = "default",
                         token: str = "emulator-token") -> Path:
        """A kubeconfig pointing at this server, with a second context that points nowhere;
        ``token`` is the bearer token (who the user is, with ``KubeEmulator.tokens``)."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}},
                         {"name": "nowhere", "cluster": {"server": "http://127.0.0.1:9"}}],
            "users": [{"name": "tester", "user": {"token": token}}],
            "contexts": [{"name": context,
                          "context": {"cluster": "emulator", "user": "tester", "namespace": namespace}},
                         {"name": "unreachable", "context": {"cluster": "nowhere", "user": "tester"}}],
        }
        path.write_text(yaml.safe_dump(config))
        return path
