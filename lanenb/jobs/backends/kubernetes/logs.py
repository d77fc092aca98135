"""Launcher (and worker) pod logs, with a follow that survives dropped connections.

The launcher pod's name has a random suffix, so it is found by the operator's labels. The
follow asks the kubelet for timestamps and remembers the newest timestamp seen and how many
lines carried it; after a dropped connection it reconnects with ``sinceSeconds`` (plus a
margin for clock skew) and skips what it already yielded, so no line is lost or repeated.
"""

from __future__ import annotations

import calendar
import json
import time
from typing import Any, Callable, Iterator

import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from lanenb_trainer.events import split_rank_tag

from ..base import LogLine
from .client import Clients, KubernetesAPIError, KubernetesUnreachableError, _is_transport_error
from .manifests import JOB_NAME_LABEL, JOB_ROLE_LABEL

__all__ = ["find_pod", "pod_dicts", "read_pod", "follow_pod_lines", "read_pod_lines", "to_log_lines", "ts_key"]

POLL = 0.2  # seconds between looks while a pod is pending
SKEW_MARGIN = 60  # seconds of log re-read after a reconnect (deduplicated by timestamp)


def pod_dicts(clients: Clients, namespace: str, job: str, role: str | None = None) -> list[dict[str, Any]]:
    selector = f"{JOB_NAME_LABEL}={job}" + (f",{JOB_ROLE_LABEL}={role}" if role else "")
    # Raw JSON, not the client's models: their strict validation rejects fields newer clusters add.
    resp = clients.call(clients.core.list_namespaced_pod, namespace, label_selector=selector, what="listing pods",
                        _preload_content=False, _request_timeout=(5, 30))
    return list(json.loads(resp.data).get("items") or [])


def read_pod(clients: Clients, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        resp = clients.call(clients.core.read_namespaced_pod, name, namespace, what=f"reading pod {name}",
                            _preload_content=False, _request_timeout=(5, 30))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return json.loads(resp.data)


def find_pod(clients: Clients, namespace: str, job: str, worker: int | None = None) -> dict[str, Any] | None:
    """The launcher pod (newest, if the Job retried), or worker ``worker``."""
    if worker is None:
        pods = pod_dicts(clients, namespace, job, "launcher")
    else:
        pods = [p for p in pod_dicts(clients, namespace, job, "worker")
                if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/replica-index") == str(worker)
                or p["metadata"]["name"].endswith(f"-worker-{worker}")]
    pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
    return pods[-1] if pods else None


def ts_key(stamp: str) -> tuple[str, str]:
    """Order RFC 3339 nano timestamps (Go trims trailing zeros, so strings do not sort)."""
    main, _, frac = stamp.rstrip("Z").partition(".")
    return main, frac.ljust(9, "0")


def parse_time_key(key: tuple[str, str]) -> float:
    """A ``ts_key`` back to UNIX seconds (to size ``sinceSeconds`` on reconnect)."""
    return calendar.timegm(time.strptime(key[0][:19], "%Y-%m-%dT%H:%M:%S")) + float("0." + key[1])


def _split_stamp(line: str) -> tuple[str | None, str]:
    stamp, sep, text = line.partition(" ")
    if sep and len(stamp) >= 20 and stamp[4] == "-" and stamp[10] == "T":
        return stamp, text
    return None, line


def _container_terminated(pod: dict[str, Any] | None) -> bool:
    if pod is None:
        return True
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if (cs.get("state") or {}).get("terminated"):
            return True
    return False


def read_pod_lines(clients: Clients, namespace: str, pod: str, container: str | None = None) -> list[str]:
    """The log so far (no follow)."""
    try:
        text = clients.call(clients.core.read_namespaced_pod_log, pod, namespace, container=container,
                            what=f"reading the log of pod {pod}")
    except ApiException as exc:
        if exc.status == 400:  # container not started yet: nothing to show
            return []
        raise KubernetesAPIError(f"cannot read the log of pod {namespace}/{pod}: {exc.reason}", exc.status) from exc
    return text.splitlines()


def follow_pod_lines(
    clients: Clients,
    namespace: str,
    pod_name: str,
    container: str | None = None,
    *,
    refresh: Callable[[], dict[str, Any] | None],
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[str]:
    """Yield every line of the pod's log exactly once until the container ends.

    ``refresh`` returns the pod's current state (None once it is gone); ``stop`` lets the
    caller end the follow early (e.g. the job was cancelled).
    """
    last: tuple[str, str] | None = None
    seen_at_last = 0
    failures = 0
    while not stop():
        since = None
        if last is not None:
            # The Python client has no sinceTime: ask for the last seconds since that line, with a
            # margin for clock skew between us and the node; the timestamps drop what we already have.
            since = int(max(0.0, time.time() - parse_time_key(last))) + SKEW_MARGIN
        try:
            resp = clients.call(
                clients.core.read_namespaced_pod_log, pod_name, namespace, container=container, follow=True,
                timestamps=True, since_seconds=since, _preload_content=False, _request_timeout=(5, 300),
                what=f"following the log of pod {pod_name}",
            )
        except ApiException as exc:
            if exc.status == 400:  # still waiting to start
                pod = refresh()
                if _container_terminated(pod) or stop():
                    return
                time.sleep(POLL)
                continue
            if exc.status == 404:
                return  # pod deleted (cancelled / cleaned up)
            raise KubernetesAPIError(f"cannot follow the log of pod {namespace}/{pod_name}: {exc.reason}",
                                     exc.status) from exc
        try:
            at_last = 0
            for raw in iter_resp_lines(resp):
                stamp, text = _split_stamp(raw)
                if stamp is None:
                    yield raw
                    continue
                key = ts_key(stamp)
                if last is not None and key < last:
                    continue
                if last is not None and key == last:
                    at_last += 1
                    if at_last <= seen_at_last:
                        continue  # already yielded before the reconnect
                    seen_at_last = at_last
                else:
                    last, seen_at_last, at_last = key, 1, 1
                failures = 0
                yield text
        except Exception as exc:
            if not _is_transport_error(exc):
                raise
            if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
                continue  # a quiet launcher (long epoch), not a broken connection: just ask again
            failures += 1
            if failures > clients.retry.attempts:
                raise KubernetesUnreachableError(
                    f"lost the log stream of pod {namespace}/{pod_name} on {clients.where()} "
                    f"{failures} times in a row: {type(exc).__name__}: {exc}") from exc
            time.sleep(clients.retry.delay(failures - 1))
            continue  # reconnect and resume after the last line seen
        finally:
            resp.release_conn()
        # A clean end of stream: the container ended, or the apiserver closed a long request.
        if _container_terminated(refresh()):
            return


def to_log_lines(lines: Iterator[str] | list[str], source: str) -> Iterator[LogLine]:
    for text in lines:
        rank, rest = split_rank_tag(text)
        yield LogLine(rank=rank, text=rest, source=source)
