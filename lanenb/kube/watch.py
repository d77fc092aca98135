"""Watching one MPIJob: resourceVersion bookkeeping, re-list on 410 Gone, resume on errors.

Some servers (and test emulators) replay objects the client already saw; events whose
resourceVersion is not newer than the last one yielded are dropped, so every change is
reported once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, cast

from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from lanenb.kube.client import (
    MPIJOB_GROUP,
    MPIJOB_PLURAL,
    MPIJOB_VERSION,
    RETRYABLE_STATUS,
    Clients,
    _is_transport_error,
)

__all__ = ["watch_mpijob"]


def _rv(obj: dict[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:  # opaque versions: fall back to "always new"
        return 0


def watch_mpijob(clients: Clients, namespace: str, name: str, *, timeout: float | None = None
                 ) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Yield ("ADDED"|"MODIFIED"|"DELETED"|"CURRENT", object) for one MPIJob until ``timeout``.

    "CURRENT" is the state found by a (re-)list; ("DELETED", None) when a re-list finds it gone.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    selector = f"metadata.name={name}"
    newest = -1
    relist = True
    resource_version: str | None = None
    failures = 0
    while deadline is None or time.monotonic() < deadline:
        if relist:
            listing = cast(dict[str, Any], clients.call(  # custom objects are JSON dicts; typed "object"
                clients.custom.list_namespaced_custom_object, MPIJOB_GROUP, MPIJOB_VERSION, namespace, MPIJOB_PLURAL,
                field_selector=selector, what=f"listing MPIJob {name}"))
            resource_version = (listing.get("metadata") or {}).get("resourceVersion")
            items = listing.get("items") or []
            if items and _rv(items[0]) > newest:
                newest = _rv(items[0])
                yield "CURRENT", items[0]
            elif not items:
                yield "DELETED", None
                return
            relist = False
        left = None if deadline is None else max(1, int(deadline - time.monotonic() + 0.999))
        watcher = k8s_watch.Watch()
        try:
            for event in watcher.stream(
                clients.custom.list_namespaced_custom_object, MPIJOB_GROUP, MPIJOB_VERSION, namespace, MPIJOB_PLURAL,
                field_selector=selector, resource_version=resource_version, allow_watch_bookmarks=True,
                timeout_seconds=min(left or 300, 300), _request_timeout=(5, (left or 300) + 10),
            ):
                obj = event.get("raw_object") or event.get("object")
                if event.get("type") == "BOOKMARK":
                    resource_version = (obj.get("metadata") or {}).get("resourceVersion") or resource_version
                    continue
                rv = _rv(obj)
                resource_version = str(rv) if rv else resource_version
                failures = 0
                if event["type"] == "DELETED":
                    yield "DELETED", obj
                    return
                if rv and rv <= newest:
                    continue  # a replay of something already reported
                newest = max(newest, rv)
                yield event["type"], obj
                if deadline is not None and time.monotonic() >= deadline:
                    return
        except ApiException as exc:
            if exc.status == 410:  # our resourceVersion is too old: start over from a fresh list
                relist = True
                continue
            if exc.status in RETRYABLE_STATUS and failures < clients.retry.attempts:
                failures += 1
                time.sleep(clients.retry.delay(failures - 1))
                continue
            raise
        except Exception as exc:
            if not _is_transport_error(exc) or failures >= clients.retry.attempts:
                raise
            failures += 1
            time.sleep(clients.retry.delay(failures - 1))
            continue
        finally:
            watcher.stop()
