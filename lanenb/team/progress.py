"""Progress, ETA, headline and GPU use of teammates' jobs, from their launchers' event lines.

The only place a running MPIJob says how far it is lies in its launcher's log (``@lanenb``
events). Reading every log on every refresh would cost a request per job per refresh, so each
job's log is read incrementally (a ``StampCursor``: only the lines since the last read), at most
once per ``every_s``, at most ``max_reads`` jobs per pass (the least recently read first), and
folded into a small ``RunState`` per job. A namespace whose pod logs we may not read (403) is
remembered and reported, not asked again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from lanenb.analysis.runstate import RunState
from lanenb.backends.kubernetes.launcher_log import to_log_lines_with_cursors
from lanenb.kube.client import Clients, KubernetesAPIError, KubernetesError
from lanenb.kube.logs import StampCursor, read_pod_lines_after

__all__ = ["ProgressReader", "TAIL_LINES"]

TAIL_LINES = 400  # a first read takes the log's tail: step events carry total_steps, so progress shows at once
_PARALLEL = 4


@dataclass
class _Entry:
    state: RunState = field(default_factory=lambda: RunState(max_points=8, max_log_lines=1))
    cursor: str | None = None
    pod: str | None = None
    read_at: float = 0.0
    final: bool = False  # a finished job's log was read after it finished: nothing more will come


class ProgressReader:
    """One ``RunState`` per job uid, brought up to date by ``read``."""

    def __init__(self, clients: Clients, *, every_s: float = 10.0, max_reads: int = 50) -> None:
        self.clients, self.every_s, self.max_reads = clients, every_s, max_reads
        self._entries: dict[str, _Entry] = {}
        self.forbidden: dict[str, str] = {}  # namespace -> the API server's words
        self._lock = threading.Lock()

    def state(self, uid: str) -> RunState | None:
        entry = self._entries.get(uid)
        return None if entry is None or entry.read_at == 0.0 else entry.state

    def read(self, jobs: Iterable[tuple[str, str, str, str, bool]], now: float | None = None) -> int:
        """Read the logs that are due. ``jobs``: (uid, namespace, launcher pod, state, finished);
        returns how many logs were read."""
        now = time.monotonic() if now is None else now
        due = []
        for uid, namespace, pod, _state, finished in jobs:
            if namespace in self.forbidden:
                continue
            entry = self._entries.setdefault(uid, _Entry())
            if entry.pod != pod:  # a new launcher pod (a retry): its log starts over
                entry.pod, entry.cursor = pod, None
            if entry.final or now - entry.read_at < self.every_s:
                continue
            due.append((entry, namespace, pod, finished))
        due.sort(key=lambda d: d[0].read_at)
        due = due[:self.max_reads]
        if not due:
            return 0
        with ThreadPoolExecutor(min(_PARALLEL, len(due)), thread_name_prefix="lanenb-team-log") as pool:
            list(pool.map(lambda d: self._read_one(*d, now=now), due))
        return len(due)

    def _read_one(self, entry: _Entry, namespace: str, pod: str, finished: bool, *, now: float) -> None:
        pos = StampCursor.decode(entry.cursor)
        try:
            read = read_pod_lines_after(self.clients, namespace, pod, "launcher", pos, tail_lines=TAIL_LINES)
        except KubernetesAPIError as exc:
            if exc.status == 403:
                with self._lock:
                    self.forbidden[namespace] = str(exc).split(" on ", 1)[0]
            entry.read_at = now
            return
        except KubernetesError:
            entry.read_at = now  # unreachable for now: try again next pass
            return
        for line, cursor in to_log_lines_with_cursors(read, "launcher"):
            entry.state.fold_line(line)
            entry.cursor = cursor
        entry.read_at = now
        entry.final = finished

    def forget(self, keep: set[str]) -> None:
        """Drop the states of jobs no longer listed."""
        for uid in [u for u in self._entries if u not in keep]:
            del self._entries[uid]
