"""Tornado handlers of the lanenb server extension: each is a few lines over ``api.py``.

Every verb is ``@tornado.web.authenticated`` (Jupyter's token/cookie auth; POSTs also pass
Jupyter's XSRF check) and ``@authorized`` on resource ``"lanenb"`` with jupyter_server's
action for its HTTP method (GET "read", POST "write"), so a server's ``Authorizer`` (JupyterHub's
read-only sharing, a custom one) decides who may look and who may stop or restore; a restore
also needs "write" on ``"contents"``, because it creates files in the server's file browser.
Every URL sits under the server's ``base_url`` (``/user/<name>/`` behind JupyterHub).

Every blocking call runs on lanenb's own bounded thread pool (``EXECUTOR_THREADS``), never the
IOLoop's default executor: a restic restore or a list reading waiting for another one must not
take the threads Jupyter's own handlers share. A long poll stops polling when its client goes.
Mistakes come back as a 4xx JSON ``{"message": ...}`` naming the parameter and value:
``UserError`` 400, an unknown job, sweep or snapshot 404, an existing restore target 409, a user
the authorizer refuses 403.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado.ioloop import IOLoop

import lanenb.server.api as api
from lanenb.errors import UserError
from lanenb.jobs import JobNotFoundError, JobStateError

__all__ = ["setup_handlers", "NAMESPACE", "AUTH_RESOURCE", "EXECUTOR_THREADS"]

NAMESPACE = "lanenb"
AUTH_RESOURCE = "lanenb"  # the resource an Authorizer is asked about (as "kernels", "contents", "lsp")
MAX_WAIT_S = 25.0  # longest long-poll: below common proxy idle timeouts (30-60 s)
POLL_S = 0.5       # a long poll asks the job's shared feed this often (the feed reads at most per tick)
EXECUTOR_THREADS = 8  # lanenb's blocking calls at once; more queue here, never on Jupyter's own pool

_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """lanenb's thread pool, made on first use: one per server process, like the feeds it serves
    (``api.FEEDS``). Bounded, so a flood of slow requests queues instead of spawning threads."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(EXECUTOR_THREADS, thread_name_prefix="lanenb-server")
        return _EXECUTOR


def _http_status(exc: UserError) -> int:
    from lanenb.snapshots import SnapshotNotFoundError, TargetExistsError
    from lanenb.sweeps import SweepNotFoundError

    if isinstance(exc, (JobNotFoundError, SnapshotNotFoundError, SweepNotFoundError)):
        return 404
    if isinstance(exc, (TargetExistsError, JobStateError)):  # the job's state says no: a conflict
        return 409
    from lanenb.team import TeamPermissionError

    if isinstance(exc, TeamPermissionError):  # RBAC refused; a hidden restore target stays a 400
        return 403
    return 400


class _Base(APIHandler):
    auth_resource = AUTH_RESOURCE  # what ``@authorized`` asks the server's Authorizer about

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on lanenb's thread pool; a ``UserError`` becomes a 4xx."""
        try:
            return await IOLoop.current().run_in_executor(_executor(), functools.partial(fn, *args, **kwargs))
        except UserError as exc:
            raise tornado.web.HTTPError(_http_status(exc), str(exc), reason=type(exc).__name__) from exc

    _gone: asyncio.Event | None = None  # set when the client closes its connection

    def on_connection_close(self) -> None:
        super().on_connection_close()
        self._gone = self._gone or asyncio.Event()
        self._gone.set()

    async def client_left(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; True as soon as the client has closed its connection."""
        self._gone = self._gone or asyncio.Event()
        try:
            await asyncio.wait_for(self._gone.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def reply(self, data: Any) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))

    def json_body(self) -> dict[str, Any]:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError as exc:
            raise tornado.web.HTTPError(400, f"the request body is not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise tornado.web.HTTPError(400, "the request body must be a JSON object")
        return body

    def int_arg(self, name: str, default: int) -> int:
        raw = self.get_query_argument(name, None)
        if raw is None:
            return default
        try:
            return int(raw)
        except ValueError:
            raise tornado.web.HTTPError(400, f"{name}={raw!r}: must be an integer") from None


class JobsHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply({"jobs": await self.call(api.list_job_summaries, self.int_arg("limit", 50))})


class JobHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        self.reply(await self.call(api.job_detail, name))


class StopHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        body = self.json_body()
        self.reply(await self.call(api.stop_job, name, body.get("confirm")))


class SuspendHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        self.json_body()  # a body, when sent, must be JSON like every POST's
        self.reply(await self.call(api.suspend_job, name))


class ResumeHandler(_Base):
    """``POST .../jobs/NAME/resume {"changes": {"num_workers": 6}}`` (changes optional)."""

    @tornado.web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        body = self.json_body()
        self.reply(await self.call(api.resume_job, name, body.get("changes")))


class ApplyHandler(_Base):
    """``POST .../jobs/NAME/apply {"setting", "value"}``: the verdict's change, suspend + resume."""

    @tornado.web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        body = self.json_body()
        self.reply(await self.call(api.apply_change, name, body.get("setting"), body.get("value")))


class UpdatesHandler(_Base):
    """``GET .../updates?cursor=C&wait=S``: the updates after cursor ``C`` (one ``Job.poll``
    stream); with ``wait`` it is a long poll that answers as soon as something new arrives (or
    after ``S`` seconds, or once the job is final). Resume with the returned ``cursor``.
    ``tail=N`` without a cursor starts at the live end (the last ``N`` lines); ``state=1`` adds
    what the job panel draws (``api.job_panel_state``: status, verdict, rank table, charts).
    Served from the job's shared feed, so many tabs on one job cost one log read per tick. A
    client that goes (a closed tab) ends its poll at once (``on_connection_close``), not after
    ``wait`` seconds more of polling."""

    @tornado.web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        cursor = self.get_query_argument("cursor", None)
        max_lines = self.int_arg("max_lines", api.MAX_LINES)
        tail = None if self.get_query_argument("tail", None) is None else self.int_arg("tail", 0)
        state = self.get_query_argument("state", "0") not in ("0", "", "false")
        raw_wait = self.get_query_argument("wait", "0")
        try:
            wait = float(raw_wait)
        except ValueError:
            raise tornado.web.HTTPError(400, f"wait={raw_wait!r}: must be a number of seconds") from None
        if not 0 <= wait <= MAX_WAIT_S:
            raise tornado.web.HTTPError(400, f"wait={raw_wait!r}: must be from 0 to {MAX_WAIT_S:g} seconds")
        deadline = time.monotonic() + wait
        while True:
            batch = await self.call(api.job_updates, name, cursor, max_lines, tail=tail)
            if batch["updates"] or batch["final"] or time.monotonic() >= deadline:
                break
            cursor, tail = batch["cursor"], None  # a tail request goes on waiting at the live end
            if await self.client_left(min(POLL_S, max(0.0, deadline - time.monotonic()))):
                return  # nobody to answer: stop asking the feed (tornado drops the reply)
        if state:  # from the same shared feed, after the wait: the charts of this very moment
            batch["state"] = await self.call(api.job_panel_state, name)
        self.reply(batch)


class MetricsHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        self.reply(await self.call(api.job_metrics, name))


class SweepsHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply({"sweeps": await self.call(api.list_sweep_summaries, self.int_arg("limit", 50))})


class SweepHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        self.reply(await self.call(api.sweep_detail, name))


class SweepStopHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def post(self, name: str) -> None:
        body = self.json_body()
        self.reply(await self.call(api.stop_sweep, name, body.get("confirm")))


def _store_args(handler: _Base) -> dict[str, Any]:
    return {"backend": handler.get_query_argument("backend", "local"),
            "namespace": handler.get_query_argument("namespace", None)}


class SnapshotsHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        snaps = await self.call(api.list_snapshots, self.get_query_argument("volume", None),
                                self.get_query_argument("job", None), **_store_args(self))
        self.reply({"snapshots": snaps})


class SnapshotDiffHandler(_Base):
    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply(await self.call(api.diff_snapshots, self.get_query_argument("a", ""),
                                   self.get_query_argument("b", ""), **_store_args(self)))


class RestoreHandler(_Base):
    """``POST .../snapshots/<id>/restore {"new_volume"}``: write on ``lanenb`` and on ``contents``
    (the restore creates files the file browser shows), into no hidden path unless the server
    allows hidden files (``ContentsManager.allow_hidden``, as Jupyter's own contents API)."""

    @tornado.web.authenticated
    @authorized
    @authorized(action="write", resource="contents")
    async def post(self, id: str) -> None:
        body = self.json_body()
        root_dir = self.settings.get("server_root_dir") or "."
        self.reply(await self.call(api.restore_snapshot, id, body.get("new_volume"), root_dir=root_dir,
                                   allow_hidden=bool(self.contents_manager.allow_hidden),
                                   backend=body.get("backend", "local"), namespace=body.get("namespace")))


class TeamHandler(_Base):
    """``GET .../team?namespace=NS&context=C``: the team view (``api.team_view``)."""

    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply(await self.call(api.team_view, self.get_query_arguments("namespace") or None,
                                   self.get_query_argument("context", None)))


class TeamStopHandler(_Base):
    """``POST .../team/<namespace>/<name>/stop {"confirm", "uid"}``: 403 where RBAC refuses."""

    @tornado.web.authenticated
    @authorized
    async def post(self, namespace: str, name: str) -> None:
        body = self.json_body()
        self.reply(await self.call(api.stop_team_job, namespace, name, body.get("confirm"), body.get("uid"),
                                   body.get("context")))


def setup_handlers(web_app: tornado.web.Application) -> list[str]:
    """Add the lanenb routes under the server's ``base_url``; returns the URL patterns."""
    base = url_path_join(web_app.settings["base_url"], NAMESPACE)
    name = r"(?P<name>[^/]+)"
    routes = [
        (url_path_join(base, "jobs"), JobsHandler),
        (url_path_join(base, "jobs", name), JobHandler),
        (url_path_join(base, "jobs", name, "stop"), StopHandler),
        (url_path_join(base, "jobs", name, "suspend"), SuspendHandler),
        (url_path_join(base, "jobs", name, "resume"), ResumeHandler),
        (url_path_join(base, "jobs", name, "apply"), ApplyHandler),
        (url_path_join(base, "jobs", name, "updates"), UpdatesHandler),
        (url_path_join(base, "jobs", name, "metrics"), MetricsHandler),
        (url_path_join(base, "team"), TeamHandler),
        (url_path_join(base, "team", r"(?P<namespace>[^/]+)", name, "stop"), TeamStopHandler),
        (url_path_join(base, "sweeps"), SweepsHandler),
        (url_path_join(base, "sweeps", name), SweepHandler),
        (url_path_join(base, "sweeps", name, "stop"), SweepStopHandler),
        (url_path_join(base, "snapshots"), SnapshotsHandler),
        (url_path_join(base, "snapshots", "diff"), SnapshotDiffHandler),
        (url_path_join(base, "snapshots", r"(?P<id>[^/]+)", "restore"), RestoreHandler),
    ]
    web_app.add_handlers(".*$", routes)
    return [pattern for pattern, _ in routes]
