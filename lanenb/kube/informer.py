"""One list, then one watch: a resource kept current in memory, as client-go's informers do.

A view that lists every MPIJob, pod and node of a team on every refresh costs the API server
(and the kernel: parsing megabytes of JSON) in proportion to the team's size, every few
seconds. An ``Informer`` lists once, then follows a watch from the list's ``resourceVersion``
(re-listing on 410 Gone, resuming after dropped connections), so a refresh reads a dict.

Objects stay plain JSON dicts (``_preload_content=False``): the client's model classes cost
~10x more to build and reject fields newer clusters add. A 403 is not an error to raise: the
informer says ``forbidden`` with the API server's message, and a view says what it could not read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from lanenb.kube.client import RETRYABLE_STATUS, Clients, KubernetesAPIError, KubernetesError, _is_transport_error

__all__ = ["Informer", "WATCH_TIMEOUT_S", "Key"]

WATCH_TIMEOUT_S = 240  # each watch request's server-side timeout; the next one resumes where it ended
Key = tuple[str, str]  # (namespace or "", name)


def _key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def _message(body: str | None, fallback: str) -> str:
    try:
        return str(json.loads(body or "")["message"])
    except (ValueError, KeyError, TypeError):
        return fallback


class Informer:
    """The objects of one list call (``fn(*args, label_selector=..., field_selector=...)``),
    current: ``sync()`` lists, ``start()`` follows a watch in a daemon thread, ``stop()`` ends it.

    Args:
        clients: where to ask (its retries apply to the list).
        fn: a client list method, e.g. ``clients.core.list_pod_for_all_namespaces``; the watch
            calls the same method with ``watch=True``.
        args: its positional arguments (a namespace, a custom resource's group/version/plural).
        what: words for messages ("pods in team-a").
        on_change: called (no arguments, from the watch thread) after each change.

    State: ``items`` (key -> object), ``state`` ("new", "ready", "forbidden", "error"),
    ``error`` (the API server's words for a 403 or the last failure), ``changes`` (a counter).
    """

    def __init__(self, clients: Clients, fn: Callable[..., Any], *args: Any, what: str,
                 label_selector: str | None = None, field_selector: str | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        self.clients, self.fn, self.args, self.what = clients, fn, args, what
        self.selectors = {k: v for k, v in (("label_selector", label_selector),
                                            ("field_selector", field_selector)) if v}
        self.on_change = on_change
        self.items: dict[Key, dict[str, Any]] = {}
        self.state = "new"
        self.error: str | None = None
        self.changes = 0
        self.resource_version: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: Any = None

    # ------------------------------------------------------------------ reading
    def values(self) -> list[dict[str, Any]]:
        """The objects now (a copy of the list; the objects themselves are replaced, never changed)."""
        with self._lock:
            return list(self.items.values())

    @property
    def forbidden(self) -> bool:
        return self.state == "forbidden"

    # ------------------------------------------------------------------ list + watch
    def sync(self) -> Informer:
        """List once (with the client's retries); a 403 sets ``forbidden``, other failures ``error``."""
        try:
            resp = self.clients.raw(self.fn, *self.args, what=f"listing {self.what}", **self.selectors)
            listing = json.loads(resp.data)
        except KubernetesAPIError as exc:
            self._fail("forbidden" if exc.status == 403 else "error", _message(exc.body, str(exc)))
            return self
        except (ApiException, KubernetesError) as exc:
            self._fail("error", _message(getattr(exc, "body", None), str(exc)))
            return self
        items = {_key(o): o for o in listing.get("items") or []}
        with self._lock:
            self.items = items
            self.resource_version = (listing.get("metadata") or {}).get("resourceVersion")
            self.state, self.error = "ready", None
            self.changes += 1
        self._changed()
        return self

    def _fail(self, state: str, message: str) -> None:
        with self._lock:
            self.state, self.error = state, message

    def start(self) -> Informer:
        """Follow the watch in a daemon thread (after ``sync``; a forbidden informer stays idle)."""
        if self._thread is None and self.state == "ready":
            self._thread = threading.Thread(target=self._run, daemon=True, name=f"lanenb-informer {self.what}")
            self._thread.start()
        return self

    def stop(self) -> None:
        """End the watch: the open response is closed, so the thread ends now, not at its timeout."""
        self._stop.set()
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown() if hasattr(resp, "shutdown") else resp.close()
            except Exception:  # already closed by the thread itself
                pass
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._watch_once()
                failures = 0
                continue
            except _Gone:
                self.sync()  # our resourceVersion is too old: list again, then watch from there
                if self.state != "ready":
                    return
                continue
            except KubernetesAPIError as exc:
                if exc.status == 403 or (exc.status not in RETRYABLE_STATUS and failures >= 3):
                    self._fail("forbidden" if exc.status == 403 else "error", _message(exc.body, str(exc)))
                    return
            except Exception as exc:
                if self._stop.is_set():
                    return
                if not (_is_transport_error(exc) or isinstance(exc, (ApiException, KubernetesError))):
                    self._fail("error", f"{type(exc).__name__}: {exc}")
                    return
            failures += 1
            self._stop.wait(self.clients.retry.delay(min(failures, 6)))

    def _watch_once(self) -> None:
        resp = self.clients.raw(
            self.fn, *self.args, watch=True, resource_version=self.resource_version, allow_watch_bookmarks=True,
            timeout_seconds=WATCH_TIMEOUT_S, _request_timeout=(5, WATCH_TIMEOUT_S + 30),
            what=f"watching {self.what}", **self.selectors)
        self._resp = resp
        try:
            for line in iter_resp_lines(resp):
                if self._stop.is_set():
                    return
                self._apply(json.loads(line))
        finally:
            self._resp = None
            resp.release_conn()

    def _apply(self, event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone()
            raise KubernetesAPIError(f"watching {self.what}: {obj.get('message')}", obj.get("code"))
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        with self._lock:
            if rv:
                self.resource_version = rv
            if kind == "BOOKMARK":
                return
            if kind == "DELETED":
                self.items.pop(_key(obj), None)
            else:
                self.items[_key(obj)] = obj
            self.changes += 1
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


class _Gone(Exception):
    """410 Gone in a watch: the resourceVersion was compacted away."""
