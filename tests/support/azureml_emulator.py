"""A stateful AzureML workspace for tests: jobs kept in a dict, answered over HTTP to the SDK.

``ReplayAdapter`` (``azureml_replay.py``) answers one recorded exchange after another, which
suits one job followed in a known order; a sweep polls several jobs in an order nobody can
write down beforehand. ``AzureMLEmulator`` is the same seam (a ``requests`` transport adapter
under azure-core's ``RequestsTransport``, so the SDK's real code runs down to the socket) with
state instead of a script: a job is created by ``PUT .../jobs/NAME``, read, listed and
cancelled, and its ranks' log files grow over time as a *play* (a function of the command line
the job was submitted with) says, so the backend's log following reads them as it would read
AzureML's ``user_logs/std_log_process_N.txt``.

It serves only the routes and ``api-version`` values the recordings in
``tests/azureml/recordings`` show azure-ai-ml sending (see ``ROUTES``); anything else is
answered 404 (an unknown route) or 400 (another ``api-version``) with the route named *and*
kept in ``problems``, which a test asserts empty: the SDK turns some 404s into "not found"
answers that lanenb handles quietly, so a wrong route must not pass as a missing job. As the
replay adapter does, it checks that ARM and run-history calls carry the credential's token and
that the discovery document and the SAS-signed log files never receive it.

Lifecycle of a job, in the emulator's clock (seconds since it was created): ``NotStarted``,
``Queued`` until ``queue_s``, ``Running`` while the play's lines come out (each at its own
time), then ``Completed`` (or ``Failed``) when the play ends, or ``Running`` forever for a play
that hangs. ``POST .../cancel`` answers 202 (``Location`` + ``Retry-After``, as recorded) and
the job reads ``CancelRequested`` until ``cancel_s`` later it reads ``Canceled``; cancelling a
job in a final state is refused with 400, a missing one with 404 (as ``gone_finished_failed``
records).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
from azureml_replay import WORKSPACE, FakeCredential, http_response, wants_token
from requests.adapters import BaseAdapter

__all__ = ["AzureMLEmulator", "Play", "ROUTES", "Request"]

ARM = "management.azure.com"
REGION = "eastus"
API_HOST = f"{REGION}.api.azureml.ms"
BLOB_HOST = "lanesstorage.blob.core.windows.net"
SAS = "sv=2021-08-06&sr=b&sig=emulated-sas-signature&sp=r"
_WS = (r"/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/"
       r"Microsoft\.MachineLearningServices/workspaces/(?P<ws>[^/]+)")
_FINAL = {"Completed", "Failed", "Canceled"}


@dataclass(frozen=True)
class Route:
    """One endpoint: method, host, path pattern and the ``api-version`` the SDK sends to it."""

    name: str
    method: str
    host: str
    path: re.Pattern[str]
    api_version: str | None


def _route(name: str, method: str, host: str, path: str, api_version: str | None) -> Route:
    return Route(name, method, host, re.compile(f"^{path}$"), api_version)


# every request the recordings show azure-ai-ml 1.35 sending for the backend's calls
ROUTES = (
    _route("create_job", "PUT", ARM, _WS + r"/jobs/(?P<job>[^/]+)", "2025-01-01-preview"),
    _route("get_job", "GET", ARM, _WS + r"/jobs/(?P<job>[^/]+)", "2024-01-01-preview"),
    _route("list_jobs", "GET", ARM, _WS + r"/jobs", "2024-01-01-preview"),
    _route("cancel_job", "POST", ARM, _WS + r"/jobs/(?P<job>[^/]+)/cancel", "2023-04-01-preview"),
    _route("get_workspace", "GET", ARM, _WS, "2024-10-01-preview"),
    _route("get_compute", "GET", ARM, _WS + r"/computes/(?P<compute>[^/]+)", "2023-08-01-preview"),
    _route("vm_sizes", "GET", ARM, r"/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.MachineLearningServices/"
           r"locations/(?P<location>[^/]+)/vmSizes", "2023-08-01-preview"),
    _route("discovery", "GET", API_HOST, r"/discovery", None),
    _route("run_details", "GET", API_HOST, r"/history/v1\.0" + _WS + r"/runs/(?P<job>[^/]+)/details", "v1.0"),
    _route("log_file", "GET", BLOB_HOST,
           r"/azureml/ExperimentRun/dcid\.(?P<job>[^/]+)/user_logs/std_log_process_(?P<rank>\d+)\.txt", None),
)

# the cluster the capacity check reads (capacity_cpu.json's): 2 nodes of 4 vCPUs, no GPU
COMPUTES = {"cpu-cluster": {"vmSize": "STANDARD_DS3_V2", "maxNodeCount": 2}}
VM_SIZES = [{"name": "Standard_DS3_v2", "family": "standardDSv2Family", "vCPUs": 4, "gpus": 0,
             "memoryGB": 14.0, "supportedComputeTypes": ["AmlCompute", "ComputeInstance"]}]


@dataclass(frozen=True)
class Play:
    """What a job's ranks write: ``(seconds after the job starts running, rank, line)``, then
    ``end``: ``Completed``, ``Failed`` (at the last line's time) or ``hang`` (runs until cancelled)."""

    lines: tuple[tuple[float, int, str], ...]
    end: str = "Completed"


@dataclass(frozen=True)
class Request:
    """One request as the emulator saw it (the route's name, or None for an unknown one)."""

    method: str
    url: str
    route: str | None
    job: str | None = None


@dataclass
class _Job:
    name: str
    body: dict[str, Any]  # the PUT's properties, as the SDK sent them
    argv: list[str]
    ranks: int
    play: Play
    created: float
    cancelled: float | None = None
    logs: dict[int, bytes] = field(default_factory=dict)


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AzureMLEmulator(BaseAdapter):
    """A workspace's jobs over HTTP. ``play(argv)`` turns a job's command line (``shlex`` split,
    as AzureML's shell would) into its ``Play``; ``queue_s``: time spent ``Queued``;
    ``cancel_s``: time from a cancel request to ``Canceled``.

    Attributes:
        jobs: name -> the job's state; ``requests``: every request seen; ``problems``: every
            request the real service would not have answered (unknown route, other api-version,
            a token where none belongs...).
    """

    def __init__(self, play: Callable[[list[str]], Play], *, queue_s: float = 0.2, cancel_s: float = 0.2,
                 workspace: dict[str, str] | None = None, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.play = play
        self.queue_s = queue_s
        self.cancel_s = cancel_s
        self.workspace = dict(workspace or WORKSPACE)
        self.clock = clock
        self.jobs: dict[str, _Job] = {}
        self.requests: list[Request] = []
        self.problems: list[str] = []
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ what tests read
    def sent(self, route: str, job: str | None = None) -> list[Request]:
        """The requests of one route (of one job)."""
        with self._lock:
            return [r for r in self.requests if r.route == route and (job is None or r.job == job)]

    def status_of(self, name: str) -> str:
        """A job's AzureML status now (``KeyError`` for an unknown one)."""
        with self._lock:
            return self._status(self.jobs[name])

    # ------------------------------------------------------------------ transport
    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        method, url = str(request.method), str(request.url)
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            route, match = self._match(method, parts.netloc, parts.path)
            job = (match.groupdict().get("job") if match else None)
            self.requests.append(Request(method, url, route.name if route else None, job))
            if route is None or match is None:
                return self._problem(request, 404, "NotFound", f"emulator: no route for {method} {parts.netloc}"
                                                               f"{parts.path}")
            signed = request.headers.get("Authorization") == f"Bearer {FakeCredential.token}"
            if signed != wants_token(url):
                return self._problem(request, 401, "InvalidAuthenticationToken",
                                     f"{route.name}: {'sent' if signed else 'no'} bearer token from the credential")
            if route.api_version is not None and query.get("api-version") != route.api_version:
                return self._problem(request, 400, "InvalidApiVersionParameter",
                                     f"{route.name}: api-version {query.get('api-version')!r}, the SDK's is "
                                     f"{route.api_version!r}")
            args = match.groupdict()
            if args.get("ws") is not None and (args["sub"], args["rg"], args["ws"]) != (
                    self.workspace["subscription_id"], self.workspace["resource_group"], self.workspace["workspace"]):
                return self._problem(request, 404, "ResourceNotFound", f"{route.name}: no workspace {args['ws']!r} "
                                                                       f"in {args['rg']}/{args['sub']}")
            return getattr(self, f"_{route.name}")(request, query, **args)

    def close(self) -> None:
        return None

    @staticmethod
    def _match(method: str, host: str, path: str) -> tuple[Route | None, re.Match[str] | None]:
        for route in ROUTES:
            found = route.path.match(path)
            if found and route.host == host and route.method == method:
                return route, found
        return None, None

    def _problem(self, request: requests.PreparedRequest, status: int, code: str, message: str) -> requests.Response:
        self.problems.append(message)
        return self._json(request, status, {"error": {"code": code, "message": message}})

    # ------------------------------------------------------------------ jobs
    def _ws_id(self) -> str:
        w = self.workspace
        return (f"/subscriptions/{w['subscription_id']}/resourceGroups/{w['resource_group']}/providers/"
                f"Microsoft.MachineLearningServices/workspaces/{w['workspace']}")

    def _create_job(self, request: requests.PreparedRequest, query: dict[str, str], *, job: str,
                    **_ws: str) -> requests.Response:
        body = json.loads(request.body or b"null")
        props = (body or {}).get("properties") if isinstance(body, dict) else None
        if not isinstance(props, dict) or props.get("jobType") != "Command" or not props.get("command"):
            return self._error(request, 400, "UserError", f"job {job}: only command jobs with a command are emulated")
        compute = str(props.get("computeId", "")).rsplit("/", 1)[-1]
        if compute not in COMPUTES:
            return self._error(request, 400, "UserError", f"Compute target {compute} is not found in workspace "
                                                          f"{self.workspace['workspace']}")
        if job in self.jobs:  # AzureML lets a PUT change only what describes a job
            old = self.jobs[job].body
            changed = sorted(k for k in {*old, *props} if k not in ("tags", "displayName", "description",
                                                                     "properties") and old.get(k) != props.get(k))
            if changed:
                return self._error(request, 400, "UserError", f"job {job} exists; {', '.join(changed)} cannot be "
                                                              f"changed")
            old.update({k: props[k] for k in ("tags", "displayName", "description") if k in props})
            return self._json(request, 200, self._view(self.jobs[job]))
        # AzureML runs the command through a shell after replacing the ${{...}} placeholders
        argv = shlex.split(str(props["command"]))
        ranks = int((props.get("distribution") or {}).get("processCountPerInstance") or 1) * int(
            (props.get("resources") or {}).get("instanceCount") or 1)
        state = _Job(job, copy.deepcopy(props), argv, ranks, self.play(argv), self.clock())
        self.jobs[job] = state
        return self._json(request, 201, self._view(state))

    def _get_job(self, request: requests.PreparedRequest, query: dict[str, str], *, job: str,
                 **_ws: str) -> requests.Response:
        if job not in self.jobs:
            return self._missing(request, job)
        return self._json(request, 200, self._view(self.jobs[job]))

    def _list_jobs(self, request: requests.PreparedRequest, query: dict[str, str], **_ws: str) -> requests.Response:
        return self._json(request, 200, {"value": [self._view(j) for j in self.jobs.values()]})

    def _cancel_job(self, request: requests.PreparedRequest, query: dict[str, str], *, job: str,
                    **_ws: str) -> requests.Response:
        if job not in self.jobs:
            return self._missing(request, job)
        state = self.jobs[job]
        status = self._status(state)
        if status in _FINAL:
            return self._error(request, 400, "UserError", f"Cannot cancel job {job}: it is in a terminal state "
                                                          f"({status})")
        if state.cancelled is None:
            state.cancelled = self.clock()
        location = (f"https://{ARM}/subscriptions/{self.workspace['subscription_id']}/providers/"
                    f"Microsoft.MachineLearningServices/locations/{REGION}/mfeOperationResults/jc:{job}"
                    f"?api-version=2023-04-01-preview")
        return self._text(request, 202, "", {"Location": location, "Retry-After": "15"})

    # ------------------------------------------------------------------ lifecycle
    def _running_since(self, state: _Job) -> float:
        return state.created + self.queue_s

    def _end_of_play(self, state: _Job) -> float | None:
        if state.play.end == "hang":
            return None
        return self._running_since(state) + max((t for t, _r, _l in state.play.lines), default=0.0)

    def _status(self, state: _Job) -> str:
        now = self.clock()
        if state.cancelled is not None:
            ended = self._end_of_play(state)
            if ended is not None and ended <= state.cancelled:
                return state.play.end  # it had ended before the cancel came
            return "Canceled" if now >= state.cancelled + self.cancel_s else "CancelRequested"
        if now < state.created + self.queue_s / 2:
            return "NotStarted"
        if now < self._running_since(state):
            return "Queued"
        ended = self._end_of_play(state)
        return state.play.end if ended is not None and now >= ended else "Running"

    def _log(self, state: _Job, rank: int) -> bytes:
        """What rank ``rank`` has written by now (nothing after a cancel)."""
        until = min(self.clock(), state.cancelled if state.cancelled is not None else float("inf"))
        since = self._running_since(state)
        return "".join(f"{line}\n" for t, r, line in state.play.lines if r == rank and since + t <= until).encode()

    def _view(self, state: _Job) -> dict[str, Any]:
        status = self._status(state)
        props = copy.deepcopy(state.body)
        times: dict[str, str] = {}
        if status not in ("NotStarted", "Queued"):
            times["StartTimeUtc"] = _iso(self._running_since(state))
        if status in _FINAL:
            times["EndTimeUtc"] = _iso(self.clock())
        props.update({
            "status": status,
            "properties": {**(props.get("properties") or {}), "_azureml.ComputeTargetType": "amlctrain", **times},
            "outputs": {**(props.get("outputs") or {}),
                        "default": {"jobOutputType": "uri_folder", "mode": "ReadWriteMount",
                                    "uri": f"azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.{state.name}"}},
            "services": {"Studio": {"jobServiceType": "Studio",
                                    "endpoint": f"https://ml.azure.com/runs/{state.name}?wsid={self._ws_id()}"}},
        })
        return {"id": f"{self._ws_id()}/jobs/{state.name}", "name": state.name,
                "type": "Microsoft.MachineLearningServices/workspaces/jobs", "properties": props,
                "systemData": {"createdAt": _iso(state.created), "createdBy": "lanenb user", "createdByType": "User",
                               "lastModifiedAt": _iso(state.created)}}

    # ------------------------------------------------------------------ workspace, compute
    def _get_workspace(self, request: requests.PreparedRequest, query: dict[str, str], **_ws: str) -> requests.Response:
        return self._json(request, 200, {"id": self._ws_id(), "name": self.workspace["workspace"], "location": REGION,
                                         "type": "Microsoft.MachineLearningServices/workspaces",
                                         "properties": {"discoveryUrl": f"https://{API_HOST}/discovery"}})

    def _get_compute(self, request: requests.PreparedRequest, query: dict[str, str], *, compute: str,
                     **_ws: str) -> requests.Response:
        if compute not in COMPUTES:
            return self._error(request, 404, "NotFound", f"Compute {compute} not found in workspace "
                                                         f"{self.workspace['workspace']}")
        shape = COMPUTES[compute]
        return self._json(request, 200, {
            "id": f"{self._ws_id()}/computes/{compute}", "name": compute, "location": REGION,
            "type": "Microsoft.MachineLearningServices/workspaces/computes",
            "properties": {"computeType": "AmlCompute", "provisioningState": "Succeeded", "properties": {
                "vmSize": shape["vmSize"], "vmPriority": "Dedicated", "osType": "Linux",
                "scaleSettings": {"maxNodeCount": shape["maxNodeCount"], "minNodeCount": 0,
                                  "nodeIdleTimeBeforeScaleDown": "PT2M"},
                "allocationState": "Steady", "currentNodeCount": 0, "targetNodeCount": 0}}})

    def _vm_sizes(self, request: requests.PreparedRequest, query: dict[str, str], *, location: str,
                  **_ws: str) -> requests.Response:
        return self._json(request, 200, {"value": VM_SIZES if location == REGION else []})

    # ------------------------------------------------------------------ run history, log files
    def _discovery(self, request: requests.PreparedRequest, query: dict[str, str]) -> requests.Response:
        base = f"https://{API_HOST}"
        return self._json(request, 200, {"api": base, "history": base, "experimentation": base,
                                         "studio": "https://ml.azure.com"})

    def _run_details(self, request: requests.PreparedRequest, query: dict[str, str], *, job: str,
                     **_ws: str) -> requests.Response:
        if job not in self.jobs:
            return self._error(request, 404, "UserError", f"Run {job} not found")
        state = self.jobs[job]
        status = self._status(state)
        files = {} if status in ("NotStarted", "Queued") else {
            f"user_logs/std_log_process_{rank}.txt":
                f"https://{BLOB_HOST}/azureml/ExperimentRun/dcid.{job}/user_logs/std_log_process_{rank}.txt?{SAS}"
            for rank in range(state.ranks)}
        return self._json(request, 200, {"runId": job, "status": status, "warnings": [], "logFiles": files,
                                         "target": str(state.body.get("computeId", "")).rsplit("/", 1)[-1]})

    def _log_file(self, request: requests.PreparedRequest, query: dict[str, str], *, job: str,
                  rank: str) -> requests.Response:
        if query.get("sig") != "emulated-sas-signature":
            return self._problem(request, 403, "AuthenticationFailed", f"log file of {job}: no SAS signature")
        state = self.jobs.get(job)
        if state is None or int(rank) >= state.ranks:
            return self._text(request, 404, "BlobNotFound")
        data = self._log(state, int(rank))
        wanted = request.headers.get("Range")
        if not wanted:
            return self._bytes(request, 200, data)
        found = re.fullmatch(r"bytes=(\d+)-", wanted)
        if found is None:
            return self._problem(request, 400, "InvalidRange", f"log file of {job}: Range {wanted!r}")
        start = int(found.group(1))
        if start >= len(data):
            return self._text(request, 416, "")
        return self._bytes(request, 206, data[start:], {"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})

    # ------------------------------------------------------------------ responses
    def _missing(self, request: requests.PreparedRequest, job: str) -> requests.Response:
        return self._error(request, 404, "UserError", f"Job {job} not found in workspace {self.workspace['workspace']}")

    def _error(self, request: requests.PreparedRequest, status: int, code: str, message: str) -> requests.Response:
        return self._json(request, status, {"error": {"code": code, "message": message}})

    def _json(self, request: requests.PreparedRequest, status: int, payload: Any) -> requests.Response:
        return self._respond(request, status, json.dumps(payload).encode(), "application/json; charset=utf-8")

    def _text(self, request: requests.PreparedRequest, status: int, text: str,
              headers: dict[str, str] | None = None) -> requests.Response:
        return self._respond(request, status, text.encode(), "text/plain; charset=utf-8", headers)

    def _bytes(self, request: requests.PreparedRequest, status: int, data: bytes,
               headers: dict[str, str] | None = None) -> requests.Response:
        return self._respond(request, status, data, "text/plain; charset=utf-8",
                             {"x-ms-blob-type": "AppendBlob", **(headers or {})})

    @staticmethod
    def _respond(request: requests.PreparedRequest, status: int, payload: bytes, content_type: str,
                 headers: dict[str, str] | None = None) -> requests.Response:
        return http_response(request, status, payload, content_type, headers, unknown_reason="Emulated")
