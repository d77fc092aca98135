"""The ``@lanenb`` event stream: the only contract between a running job and its watchers.

Ranks print one event per line to stdout. Launchers (local mpirun, Kubernetes pod logs)
and the notebook never parse anything else, so the same parser serves every backend.
Lines may carry launcher decorations before the marker (mpirun's ``[1,0]<stdout>:``,
kubectl timestamps); the parser finds the marker anywhere in the line. Which rank wrote a
line is ``lanenb_trainer.ranktag``'s business.

The schema is documented in docs/EVENTS.md; bump ``SCHEMA_VERSION`` on incompatible change.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

PREFIX = "@lanenb "
SCHEMA_VERSION = 1
KINDS = frozenset({"start", "step", "epoch", "eval", "checkpoint", "system", "timing", "end", "error", "log",
                   "snapshot", "preempted", "resumed"})

_emit_lock = threading.Lock()


@dataclass(frozen=True)
class Event:
    """One parsed event. ``data`` holds the kind-specific fields."""

    kind: str
    rank: int
    t: float
    v: int = SCHEMA_VERSION
    data: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        return {"v": self.v, "t": self.t, "rank": self.rank, "kind": self.kind, **self.data}


def _clean(value: Any) -> Any:
    """JSON has no NaN/Inf: a diverged loss must still produce a parseable line."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        try:
            return _clean(value.item())
        except (TypeError, ValueError):
            return str(value)
    return value


def format_event(kind: str, rank: int, **fields: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}; expected one of {sorted(KINDS)}")
    payload = {"v": SCHEMA_VERSION, "t": round(time.time(), 3), "rank": int(rank), "kind": kind}
    payload.update(_clean(fields))
    return PREFIX + json.dumps(payload, separators=(",", ":"), default=str)


def emit(kind: str, rank: int, stream: TextIO | None = None, **fields: Any) -> None:
    """Print one event line and flush, so watchers see it while the rank is still running."""
    line = format_event(kind, rank, **fields)
    out = stream or sys.stdout
    with _emit_lock:
        out.write(line + "\n")
        out.flush()


def parse_line(line: str) -> Event | None:
    """Return the event on this line, or None for ordinary log output or a garbled event."""
    idx = line.find(PREFIX)
    if idx < 0:
        return None
    try:
        obj = json.loads(line[idx + len(PREFIX):])
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or "kind" not in obj:
        return None
    try:
        kind = str(obj.pop("kind"))
        rank = int(obj.pop("rank", 0))
        t = float(obj.pop("t", 0.0))
        v = int(obj.pop("v", SCHEMA_VERSION))
    except (TypeError, ValueError):
        return None
    return Event(kind=kind, rank=rank, t=t, v=v, data=obj)


def parse_lines(lines: Iterable[str]) -> Iterator[Event]:
    for line in lines:
        ev = parse_line(line)
        if ev is not None:
            yield ev


# mpirun --tag-output forwards output in ~4 KiB chunks; keep each event in one chunk so
# every consumer (local launcher, pod logs) sees it whole.
MAX_EVENT_CHARS = 3800


def _shrink(fields: dict[str, Any]) -> dict[str, Any]:
    """Cut long strings (tracebacks keep their end: the raising frame and the message)."""
    out = dict(fields)
    for key, value in fields.items():
        if isinstance(value, str) and len(value) > 1200:
            out[key] = "…" + value[-1200:] if key == "traceback" else value[:1200] + "…"
        elif isinstance(value, dict) and len(json.dumps(value, default=str)) > 1500:
            out[key] = {k: v for k, v in value.items() if not isinstance(v, (dict, list))}
    return out


class EventLog:
    """The trainer's event writer: ``@lanenb`` lines to stdout; on rank 0 also appended to
    ``events.jsonl`` in the run dir; and handed to each listener (:meth:`add_listener`, e.g.
    the TensorBoard files), so a listener sees exactly what the watchers see."""

    def __init__(self, rank: int, path: Path | None = None) -> None:
        self.rank = rank
        self.path = path
        self._lock = threading.Lock()
        self._file = None
        self._listeners: list[Callable[[str, int, Mapping[str, Any]], None]] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # held open for the log's lifetime (one append per event), closed by close()
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115

    def __call__(self, kind: str, rank: int | None = None, **fields: Any) -> None:
        line = format_event(kind, self.rank if rank is None else rank, **fields)
        if len(line) > MAX_EVENT_CHARS:
            line = format_event(kind, self.rank if rank is None else rank, **_shrink(fields))
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            if self._file is not None:
                self._file.write(line[len(PREFIX):] + "\n")
                self._file.flush()
            for listener in self._listeners:  # each one catches its own errors (tensorboard_log.py)
                listener(kind, self.rank if rank is None else rank, fields)

    def add_listener(self, listener: Callable[[str, int, Mapping[str, Any]], None]) -> None:
        """Call ``listener(kind, rank, fields)`` after each event is written; it must be quick
        and must not raise: it runs on the emitting thread (the training loop's, the monitor's)."""
        self._listeners.append(listener)

    def log(self, message: str, **fields: Any) -> None:
        self("log", message=message, **fields)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            close = getattr(listener, "close", None)
            if callable(close):
                close()
