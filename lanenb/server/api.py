"""What the JupyterLab sidebar asks for, as plain functions returning JSON-able dicts.

The tornado handlers (``handlers.py``) are a few lines over these, so everything here is
testable without a server and reads the same registry, logs and snapshot stores as the kernel
side: a job launched with ``%lanetrain`` is listed here, and a job stopped here is recorded as
cancelled for every notebook watching it.

All of these block (SQLite, log files, restic, Kubernetes calls): the handlers run them in an
executor, never on the server's event loop.
"""

from __future__ import annotations

import collections
import os
import threading
from pathlib import Path
from typing import Any

from lanenb.errors import UserError
from lanenb.analysis.runstate import RunState, tail_state
from lanenb.jobs import Job, get_job, list_jobs
from lanenb.analysis.event_text import event_text
from lanenb.jobs.updates import Update

__all__ = ["ConfirmationError", "list_job_summaries", "job_detail", "stop_job", "job_updates",
           "job_metrics", "list_snapshots", "diff_snapshots", "restore_snapshot", "MAX_LINES"]

MAX_LINES = 2000          # the most log lines one updates request returns
SPARK_POINTS = 30         # utilisation samples per job in the jobs list
_TAIL_LINES = 400         # log lines read per job for the jobs list (``tail_state``)


class ConfirmationError(UserError, ValueError):
    """A stop request whose ``confirm`` field does not repeat the job's name."""


# ---------------------------------------------------------------------------- jobs
def _utilisation(state: RunState) -> dict[str, Any]:
    """The newest system samples of the lowest rank: GPU utilisation when the rank has a GPU,
    else CPU percent (what the sidebar's sparkline draws)."""
    if not state.system:
        return {"metric": None, "values": [], "last": {}}
    rank = min(state.system)
    table = state.system[rank]
    metric = "gpu_util" if "gpu_util" in table else "cpu_percent" if "cpu_percent" in table else None
    values = table[metric].y[-SPARK_POINTS:] if metric else []
    last = {k: v for k, v in state.system_last.get(rank, {}).items() if k in ("gpu_util", "cpu_percent", "t")}
    return {"metric": metric, "rank": rank, "values": values, "last": last}


def _summary(job: Job) -> dict[str, Any]:
    state = tail_state(job, _TAIL_LINES)
    return {
        "name": job.name, "backend": job.backend_name, "created": job.created,
        "state": state.state, "reason": state.reason, "progress": state.progress,
        "step": state.step, "total_steps": state.total_steps, "accuracy": state.accuracy(),
        "loss": state.loss, "summary": state.summary(), "utilisation": _utilisation(state),
        "final": state.finished or state.state == "lost",
    }


def list_job_summaries(limit: int = 50) -> list[dict[str, Any]]:
    """Jobs newest first, each with state, progress, accuracy and its latest utilisation.

    A job whose status cannot be read (a cluster that is unreachable) is listed with an
    ``error`` instead of hiding the others."""
    if not isinstance(limit, int) or limit < 1:
        raise UserError(f"limit={limit!r}: must be an integer >= 1")
    jobs = sorted(list_jobs(), key=lambda j: j.created or 0.0, reverse=True)[:limit]
    out = []
    for job in jobs:
        try:
            out.append(_summary(job))
        except Exception as exc:  # one broken job must not blank the sidebar
            out.append({"name": job.name, "backend": job.backend_name, "created": job.created,
                        "state": "unknown", "error": f"{type(exc).__name__}: {exc}", "final": False,
                        "utilisation": {"metric": None, "values": [], "last": {}}})
    return out


def job_detail(name: str) -> dict[str, Any]:
    """``Job.describe()`` (spec with secrets redacted) plus the summary and its snapshots.

    Raises:
        JobNotFoundError: no job is called ``name``.
    """
    job = get_job(name)
    info = job.describe()
    info["summary"] = _summary(job)
    info["snapshots"] = [s.to_dict() for s in job.snapshots()]
    return info


def stop_job(name: str, confirm: Any) -> dict[str, Any]:
    """Cancel job ``name``; ``confirm`` must repeat the name (the sidebar's confirmation).

    Returns:
        ``{"name", "status"}``: the recorded final status (an outcome the job already
        reached is kept, as ``Job.cancel`` does).

    Raises:
        ConfirmationError: ``confirm`` is not the job's name; nothing was stopped.
        JobNotFoundError: no job is called ``name``.
    """
    job = get_job(name)
    if confirm != name:
        raise ConfirmationError(f"confirm={confirm!r}: repeat the job's name ({name!r}) to stop it")
    return {"name": name, "status": job.cancel().to_dict()}


def _update_dict(update: Update) -> dict[str, Any]:
    out: dict[str, Any] = {"cursor": update.cursor}
    if update.status is not None:
        out["status"] = update.status.to_dict()
    if update.line is not None:
        out["line"] = {"rank": update.line.rank, "text": update.line.text, "source": update.line.source}
        text = update.line.text
        if update.event is not None:
            out["event"] = update.event.to_dict()
            text = event_text(update.event)  # None for system samples: charted, not logged
        out["display"] = text
    return out


def job_updates(name: str, cursor: str | None = None, max_lines: int = MAX_LINES) -> dict[str, Any]:
    """One ``Job.poll(cursor)`` batch: the same resumable stream the notebook view reads.

    Returns:
        ``{"updates": [...], "cursor", "final", "status"}``; pass ``cursor`` back to continue.

    Raises:
        SpecError: ``cursor`` is not one this stream returned.
        JobNotFoundError: no job is called ``name``.
    """
    if not isinstance(max_lines, int) or not 1 <= max_lines <= MAX_LINES:
        raise UserError(f"max_lines={max_lines!r}: must be an integer from 1 to {MAX_LINES}")
    batch = get_job(name).poll(cursor or None, max_lines=max_lines)
    return {"updates": [_update_dict(u) for u in batch.updates], "cursor": batch.cursor, "final": batch.final,
            "status": batch.status.to_dict() if batch.status else None}


class _StateCache:
    """Per-job ``RunState`` folded incrementally from its cursor, so a chart refresh reads only
    the new part of the log. Bounded (least recently used jobs dropped), thread-safe."""

    def __init__(self, size: int = 32) -> None:
        self._size = size
        self._items: collections.OrderedDict[str, tuple[RunState, str | None, threading.Lock]] = \
            collections.OrderedDict()
        self._lock = threading.Lock()

    def metrics(self, name: str) -> dict[str, Any]:
        job = get_job(name)
        key = f"{name}@{job.created}"  # a name reused by a new job starts a new state
        with self._lock:
            if key not in self._items:
                self._items[key] = (RunState(max_points=256, max_log_lines=1), None, threading.Lock())
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            state, cursor, lock = self._items[key]
        with lock:
            state, cursor, _ = self._items.get(key, (state, cursor, lock))
            while True:
                batch = job.poll(cursor, max_lines=MAX_LINES)
                state.apply_all(batch.updates)
                cursor = batch.cursor
                if batch.final or len(batch.updates) < MAX_LINES:
                    break
            with self._lock:
                self._items[key] = (state, cursor, lock)
            data = state.to_dict()
        data.pop("errors", None)
        data["accuracy"] = state.accuracy()
        data["name"] = name
        return data


_STATES = _StateCache()


def job_metrics(name: str) -> dict[str, Any]:
    """The run's chart history (``RunState.to_dict()``: loss/LR/throughput per step, val
    metrics per epoch, per-rank system samples), folded from the whole event stream.

    Raises:
        JobNotFoundError: no job is called ``name``.
    """
    return _STATES.metrics(name)


# ---------------------------------------------------------------------------- snapshots
def _store(backend: str, namespace: str | None) -> Any:
    from lanenb.snapshots import get_store

    return get_store(backend, **({"namespace": namespace} if namespace else {}))


def list_snapshots(volume: str | None = None, job: str | None = None, backend: str = "local",
                   namespace: str | None = None) -> list[dict[str, Any]]:
    """Snapshots newest first, each with the job that made it (registry link or label)."""
    from lanenb.commands.snapshots import job_of, registry_links

    links = registry_links()
    out = []
    for snap in _store(backend, namespace).list(volume or None):
        item = snap.to_dict()
        item["job"] = None if job_of(snap, links) == "-" else job_of(snap, links)
        if job and item["job"] != job:
            continue
        out.append(item)
    out.sort(key=lambda s: s["created"], reverse=True)
    return out


def diff_snapshots(a: str, b: str, backend: str = "local", namespace: str | None = None) -> dict[str, Any]:
    """Files added, removed and changed from snapshot ``a`` to ``b``.

    Raises:
        SnapshotNotFoundError: ``a`` or ``b`` is unknown.
        SnapshotNotSupportedError: the store cannot diff (Kubernetes).
    """
    if not a or not b:
        raise UserError(f"diff needs two snapshot ids, got a={a!r} b={b!r}")
    result = _store(backend, namespace).diff(a, b)
    return {"a": result.a, "b": result.b, "summary": result.summary(),
            "changes": [vars(c) for c in result.changes]}


def _local_target(new_volume: Any, root_dir: str | os.PathLike) -> str:
    """A restore target inside the server's root directory (as Jupyter's file browser sees it)."""
    if not isinstance(new_volume, str) or not new_volume.strip():
        raise UserError(f"new_volume={new_volume!r}: give the name of a new directory")
    root = Path(root_dir).expanduser().resolve()
    target = (root / new_volume.strip()).resolve()
    if target == root or root not in target.parents:
        raise UserError(f"new_volume={new_volume!r}: must be a new directory inside the server's root "
                        f"directory {str(root)!r}")
    return str(target)


def restore_snapshot(id: str, new_volume: Any, *, root_dir: str | os.PathLike, backend: str = "local",
                     namespace: str | None = None) -> dict[str, Any]:
    """Restore snapshot ``id`` into ``new_volume``, which must not exist (never overwrites).

    Locally ``new_volume`` is a directory relative to the server's root directory; on
    Kubernetes it is the new PVC's name.

    Raises:
        TargetExistsError: ``new_volume`` exists; nothing was changed.
        SnapshotNotFoundError: ``id`` is unknown.
        UserError: ``new_volume`` is empty or leaves the root directory.
    """
    if backend == "local":
        target = _local_target(new_volume, root_dir)
    elif not isinstance(new_volume, str) or not new_volume.strip():
        raise UserError(f"new_volume={new_volume!r}: give the name of a new PVC")
    else:
        target = new_volume.strip()
    volume = _store(backend, namespace).restore(id, target)
    return {"id": id, "volume": volume}
