"""Pod logs, with a follow that survives dropped connections (MPIJob launchers, fetch Jobs).

The follow asks the kubelet for timestamps and remembers the newest timestamp seen and how many
lines carried it; after a dropped connection it reconnects with ``sinceSeconds`` (plus a
margin for clock skew) and skips what it already yielded, so no line is lost or repeated.
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from lanenb.errors import SpecError
from lanenb.kube.client import Clients, KubernetesAPIError, KubernetesUnreachableError, _is_transport_error

__all__ = ["read_pod", "follow_pod_lines", "read_pod_lines", "read_pod_lines_after", "ts_key", "StampCursor",
           "container_terminated"]

POLL = 0.2  # seconds between looks while a pod is pending
SKEW_MARGIN = 60  # seconds of log re-read after a reconnect (deduplicated by timestamp)


def read_pod(clients: Clients, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        resp = clients.raw(clients.core.read_namespaced_pod, name, namespace, what=f"reading pod {name}",
                           _request_timeout=(5, 30))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return json.loads(resp.data)


def ts_key(stamp: str) -> tuple[str, str]:
    """Order RFC 3339 nano timestamps (Go trims trailing zeros, so strings do not sort)."""
    main, _, frac = stamp.rstrip("Z").partition(".")
    return main, frac.ljust(9, "0")


def parse_time_key(key: tuple[str, str]) -> float:
    """A ``ts_key`` back to UNIX seconds (to size ``sinceSeconds`` on reconnect)."""
    return calendar.timegm(time.strptime(key[0][:19], "%Y-%m-%dT%H:%M:%S")) + float("0." + key[1])


class StampCursor:
    """Where a reader is in a timestamped pod log: the newest timestamp delivered and how many
    lines carried it (several lines can share one timestamp). Shared by the follow and by
    ``Job.poll``'s non-blocking reads, so both skip exactly what was already delivered."""

    def __init__(self, last: tuple[str, str] | None = None, seen: int = 0) -> None:
        self.last, self.seen, self._at_last = last, seen, 0

    def new_pass(self) -> None:
        """A new request re-reads from before ``last``: count its lines at ``last`` again."""
        self._at_last = 0

    def since_seconds(self) -> int | None:
        if self.last is None:
            return None
        # The Python client has no sinceTime: ask for the last seconds since that line, with a
        # margin for clock skew between us and the node; the timestamps drop what we already have.
        return int(max(0.0, time.time() - parse_time_key(self.last))) + SKEW_MARGIN

    def admit(self, key: tuple[str, str]) -> bool:
        """True (and advance) if the line stamped ``key`` was not delivered before."""
        if self.last is not None and key < self.last:
            return False
        if self.last is not None and key == self.last:
            self._at_last += 1
            if self._at_last <= self.seen:
                return False
            self.seen = self._at_last
            return True
        self.last, self.seen, self._at_last = key, 1, 1
        return True

    def encode(self) -> str:
        return "" if self.last is None else f"{self.last[0]}.{self.last[1]}Z~{self.seen}"

    @classmethod
    def decode(cls, text: str | None) -> StampCursor:
        if not text:
            return cls()
        stamp, sep, seen = text.rpartition("~")
        if not sep or not seen.isdigit() or len(stamp) < 20 or stamp[4] != "-" or stamp[10] != "T":
            raise SpecError("cursor", text, "is not a cursor of a Kubernetes job's log")
        return cls(ts_key(stamp), int(seen))


def _split_stamp(line: str) -> tuple[str | None, str]:
    stamp, sep, text = line.partition(" ")
    if sep and len(stamp) >= 20 and stamp[4] == "-" and stamp[10] == "T":
        return stamp, text
    return None, line


def container_terminated(pod: dict[str, Any] | None) -> bool:
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


def read_pod_lines_after(clients: Clients, namespace: str, pod: str, container: str | None,
                         pos: StampCursor, *, tail_lines: int | None = None) -> list[tuple[str, str]]:
    """The lines after ``pos`` (advanced as lines are admitted), each with its cursor."""
    kwargs: dict[str, Any] = {"timestamps": True}
    if pos.last is not None:
        kwargs["since_seconds"] = pos.since_seconds()
    elif tail_lines:
        kwargs["tail_lines"] = tail_lines
    try:
        text = clients.call(clients.core.read_namespaced_pod_log, pod, namespace, container=container,
                            what=f"reading the log of pod {pod}", **kwargs)
    except ApiException as exc:
        if exc.status in (400, 404):  # not started yet / already deleted: nothing to show
            return []
        raise KubernetesAPIError(f"cannot read the log of pod {namespace}/{pod}: {exc.reason}", exc.status) from exc
    out: list[tuple[str, str]] = []
    pos.new_pass()
    for raw in text.splitlines():
        stamp, line = _split_stamp(raw)
        if stamp is None:
            out.append((raw, pos.encode()))
        elif pos.admit(ts_key(stamp)):
            out.append((line, pos.encode()))
    return out


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
    pos = StampCursor()
    failures = 0
    while not stop():
        try:
            resp = clients.raw(
                clients.core.read_namespaced_pod_log, pod_name, namespace, container=container, follow=True,
                timestamps=True, since_seconds=pos.since_seconds(),
                _request_timeout=(5, 300), what=f"following the log of pod {pod_name}",
            )
        except ApiException as exc:
            if exc.status == 400:  # still waiting to start
                pod = refresh()
                if container_terminated(pod) or stop():
                    return
                time.sleep(POLL)
                continue
            if exc.status == 404:
                return  # pod deleted (cancelled / cleaned up)
            raise KubernetesAPIError(f"cannot follow the log of pod {namespace}/{pod_name}: {exc.reason}",
                                     exc.status) from exc
        try:
            pos.new_pass()
            for raw in iter_resp_lines(resp):
                stamp, text = _split_stamp(raw)
                if stamp is None:
                    yield raw
                    continue
                if not pos.admit(ts_key(stamp)):
                    continue  # already yielded before the reconnect
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
        if container_terminated(refresh()):
            return
