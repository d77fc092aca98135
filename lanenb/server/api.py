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
import time
from pathlib import Path
from typing import Any, cast

import lanenb.server.payloads as payloads
from lanenb.analysis.runstate import tail_state
from lanenb.analysis.summary import error_summary, job_summary
from lanenb.errors import UserError
from lanenb.home import lanenb_home
from lanenb.jobs import JobRegistry, get_job, list_jobs
from lanenb.server.feeds import MAX_LINES, Feeds

__all__ = ["ConfirmationError", "HiddenTargetError", "list_job_summaries", "job_detail", "stop_job", "job_updates",
           "suspend_job", "resume_job", "apply_change",
           "job_panel_state", "job_metrics", "list_snapshots", "diff_snapshots", "restore_snapshot",
           "list_sweep_summaries", "sweep_detail", "stop_sweep", "MAX_LINES", "MAX_LIST_LIMIT", "FEEDS"]

_TAIL_LINES = 400         # log lines read per job for the jobs list (``tail_state``)

FEEDS = Feeds()  # one reduced state + update buffer per watched job, shared by every client
LIST_TTL_S = 1.0  # the jobs list is read at most this often, however many sidebars ask
MAX_LIST_LIMIT = 500  # the most rows one jobs list reads (each unfinished row reads a log tail)
LIST_KEPT = 8  # list readings kept (by home and limit), least recently read dropped with their stamps
_LIST_CACHE: dict[tuple[str, int], tuple[float, list[payloads.JobSummary]]] = {}
_LIST_LOCK = threading.Lock()
_LIST_DONE = threading.Condition(_LIST_LOCK)  # a reading finished
_LIST_STAMPS: dict[tuple[str, int], tuple[int, float]] = {}  # the registry's stamp of each kept reading
_LIST_BUSY: set[tuple[str, int]] = set()  # lists being read now (others get the previous reading meanwhile)
SWEEP_STOP_WAIT_S = 15.0  # how long a stop request waits for the sweep's driver to go
FINAL_STATES_KEPT = 1024  # reduced states of finished jobs kept for the list (they never change)
_FINAL_STATES: collections.OrderedDict[tuple[str, str, float | None], Any] = collections.OrderedDict()


class ConfirmationError(UserError, ValueError):
    """A stop request whose ``confirm`` field does not repeat the job's name."""


class HiddenTargetError(UserError, PermissionError):
    """A restore into a hidden path (``.ipython/...``) on a server that does not allow hidden
    files: a restored ``profile_default/startup`` would run as code in every new kernel."""


# ---------------------------------------------------------------------------- jobs
def _tail_state(job: Any) -> Any:
    return tail_state(job, _TAIL_LINES)


def _summary(job: Any) -> payloads.JobSummary:
    """One list row, as cheaply as it is right: a watched job's from its feed (no log read), a
    finished job's from the state read once (it will not change), the others' from their tails."""
    now = time.time()
    try:
        feed = FEEDS.peek(job.name, job.created)
        if feed is not None:
            return feed.summary(now)
        key = (str(lanenb_home()), job.name, job.created)
        state = _FINAL_STATES.get(key)
        if state is None:
            state = _tail_state(job)
            if state.finished or state.state == "lost":
                _FINAL_STATES[key] = state
                while len(_FINAL_STATES) > FINAL_STATES_KEPT:
                    _FINAL_STATES.popitem(last=False)
        return cast(payloads.JobSummary, job_summary(job, state, now=now))
    except Exception as exc:  # one broken job must not hide the others
        return cast(payloads.JobSummary, error_summary(job, exc, now=now))


def list_job_summaries(limit: int = 50) -> list[payloads.JobSummary]:
    """Jobs newest first: ``job_summary`` rows (state, progress, accuracy, latest utilisation).

    A job whose status cannot be read (a cluster that is unreachable) is listed with an
    ``error`` instead of hiding the others. Read at most once per ``LIST_TTL_S`` for every
    sidebar of the server, and after the first time beside the requests (a thread): a request
    gets the latest reading at once, never a queue behind a reading. A job added, removed or
    changing state (the registry's ``stamp``) is read at once, not a second later."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise UserError(f"limit={limit!r}: must be an integer from 1 to {MAX_LIST_LIMIT}")
    key = (str(lanenb_home()), limit)
    stamp = JobRegistry().stamp()  # a job added, removed or changing state: read the list now
    with _LIST_LOCK:  # every tab's sidebar asks every few seconds: one reading per LIST_TTL_S for all
        cached = _LIST_CACHE.get(key)
        if cached is not None and _LIST_STAMPS.get(key) != stamp:
            cached = None
            _LIST_CACHE.pop(key, None)
        if cached is not None:
            if time.monotonic() - cached[0] >= LIST_TTL_S and key not in _LIST_BUSY:
                _LIST_BUSY.add(key)  # read again beside the requests, which get this reading meanwhile
                threading.Thread(target=_read_list, args=(key, limit), daemon=True, name="lanenb-jobs-list").start()
            return cached[1]
        if key in _LIST_BUSY:  # the very first reading is under way: wait for it, do not read alongside
            _LIST_DONE.wait_for(lambda: key not in _LIST_BUSY, timeout=60)
            if key in _LIST_CACHE:
                return _LIST_CACHE[key][1]
        _LIST_BUSY.add(key)
    return _read_list(key, limit, stamp)


def _read_list(key: tuple[str, int], limit: int,
               stamp: tuple[int, float] | None = None) -> list[payloads.JobSummary]:
    try:
        stamp = stamp or JobRegistry().stamp()
        jobs = list_jobs(newest_first=True, limit=limit)  # the same order and cut as %lanejobs and `jobs list`
        rows = [_summary(job) for job in jobs]
        with _LIST_LOCK:
            _LIST_CACHE.pop(key, None)  # re-inserted last: the first key is the least recently read
            _LIST_CACHE[key] = (time.monotonic(), rows)
            _LIST_STAMPS[key] = stamp
            while len(_LIST_CACHE) > LIST_KEPT:
                _LIST_CACHE.pop(next(iter(_LIST_CACHE)))
            for gone in [k for k in _LIST_STAMPS if k not in _LIST_CACHE]:  # a stamp lives as long as its reading
                del _LIST_STAMPS[gone]
        return rows
    finally:
        with _LIST_LOCK:
            _LIST_BUSY.discard(key)
            _LIST_DONE.notify_all()


def job_detail(name: str) -> dict[str, Any]:
    """``Job.describe()`` (spec with secrets redacted) plus the summary and its snapshots.

    Raises:
        JobNotFoundError: no job is called ``name``.
    """
    job = get_job(name)
    info = job.describe()
    info["summary"] = job_summary(job, _tail_state(job))
    info["snapshots"] = [s.to_dict() for s in job.snapshots()]
    return info


def _check_confirmed(kind: str, name: str, confirm: Any) -> None:
    """A stop goes ahead only when ``confirm`` repeats the name (what the sidebar's dialog sends)."""
    if confirm != name:
        raise ConfirmationError(f"confirm={confirm!r}: repeat the {kind}'s name ({name!r}) to stop it")


def stop_job(name: str, confirm: Any) -> payloads.StopReply:
    """Cancel job ``name``; ``confirm`` must repeat the name (the sidebar's confirmation).

    Returns:
        ``{"name", "status"}``: the recorded final status (an outcome the job already
        reached is kept, as ``Job.cancel`` does).

    Raises:
        ConfirmationError: ``confirm`` is not the job's name; nothing was stopped.
        JobNotFoundError: no job is called ``name``.
    """
    job = get_job(name)
    _check_confirmed("job", name, confirm)
    status = cast(payloads.JobStatus, job.cancel().to_dict())
    with _LIST_LOCK:
        _LIST_CACHE.clear()  # the next list shows the stop at once
        _LIST_STAMPS.clear()
    return {"name": name, "status": status}


def _forget_list() -> None:
    with _LIST_LOCK:
        _LIST_CACHE.clear()  # the next list shows the change at once
        _LIST_STAMPS.clear()


def suspend_job(name: str) -> payloads.StopReply:
    """Suspend job ``name`` (``Job.suspend``: a checkpoint at the next step boundary, no rank left).

    Returns:
        ``{"name", "status"}``: SUSPENDED, or the outcome the run reached first.

    Raises:
        JobStateError: the job has ended. JobNotFoundError: no job is called ``name``.
    """
    status = cast(payloads.JobStatus, get_job(name).suspend().to_dict())
    _forget_list()
    return {"name": name, "status": status}


def _changes(changes: Any) -> dict[str, Any]:
    if changes is None:
        return {}
    if not isinstance(changes, dict) or not all(isinstance(k, str) for k in changes):
        raise UserError(f"changes={changes!r}: must be an object of settings, e.g. {{\"num_workers\": 6}}")
    return changes


def resume_job(name: str, changes: Any = None) -> payloads.StopReply:
    """Resume suspended (or preempted) job ``name`` from its checkpoint, with ``changes``
    (``Job.resume(**changes)``, e.g. ``{"num_workers": 6}``).

    Raises:
        UserError: ``changes`` is not an object. SpecError: a setting or value ``Job.resume``
        refuses. JobStateError: the job is not suspended or preempted.
    """
    status = cast(payloads.JobStatus, get_job(name).resume(**_changes(changes)).to_dict())
    _forget_list()
    return {"name": name, "status": status}


def apply_change(name: str, setting: Any, value: Any) -> payloads.StopReply:
    """The doctor's advice as one action: suspend job ``name`` at a step boundary and resume it
    from that checkpoint with ``setting=value`` (the verdict's ``change``). A job already
    suspended or preempted is only resumed.

    Raises:
        SpecError: a setting or value ``Job.resume`` refuses (checked before anything stops).
        JobStateError: the job has ended.
    """
    if not isinstance(setting, str) or not setting:
        raise UserError(f"setting={setting!r}: must name a setting, e.g. \"num_workers\"")
    status = cast(payloads.JobStatus, get_job(name).apply_change(setting, value).to_dict())
    _forget_list()
    return {"name": name, "status": status}


def job_updates(name: str, cursor: str | None = None, max_lines: int = MAX_LINES, *,
                tail: int | None = None) -> payloads.UpdateBatch:
    """The job's update stream after ``cursor`` (the notebook view's ``Job.poll`` stream),
    served from the job's shared feed: clients that keep up cause no log reads of their own.

    Args:
        tail: without ``cursor``: start at the live end with the last ``tail`` lines instead of
            replaying the log from its start.

    Returns:
        ``{"updates": [...], "cursor", "final", "status"}``; pass ``cursor`` back.

    Raises:
        SpecError: ``cursor`` is not one this stream returned.
        JobNotFoundError: no job is called ``name``.
        UserError: ``max_lines`` or ``tail`` out of range.
    """
    if not isinstance(max_lines, int) or not 1 <= max_lines <= MAX_LINES:
        raise UserError(f"max_lines={max_lines!r}: must be an integer from 1 to {MAX_LINES}")
    if tail is not None and (not isinstance(tail, int) or not 0 <= tail <= MAX_LINES):
        raise UserError(f"tail={tail!r}: must be an integer from 0 to {MAX_LINES}")
    return FEEDS.get(name).updates(cursor or None, max_lines, tail=tail)


def job_panel_state(name: str) -> payloads.JobPanelState:
    """What the job panel draws (``JobFeed.panel_state``: status fields, headline, verdict, rank
    table, charts), from the job's shared feed: what the update stream carries as ``state`` when
    asked.

    Raises:
        JobNotFoundError: no job is called ``name``.
    """
    feed = FEEDS.get(name)
    feed.refresh()
    return feed.panel_state()


def job_metrics(name: str) -> dict[str, Any]:
    """The run's whole chart history (``JobFeed.view``: ``RunState.to_dict()`` with loss/LR/
    throughput per step, val metrics per epoch, per-rank system samples, plus the panel's
    fields), from the job's shared feed: for scripts (README); the panel reads ``job_panel_state``.

    Raises:
        JobNotFoundError: no job is called ``name``.
    """
    feed = FEEDS.get(name)
    feed.refresh()
    return feed.view()


# ---------------------------------------------------------------------------- sweeps
def list_sweep_summaries(limit: int = 50) -> list[payloads.SweepSummary]:
    """Sweeps newest first: ``Sweep.summary()`` rows (state, trials settled of the total, the best
    trial, the objective). A sweep whose study cannot be read is listed with an ``error`` (state
    ``unknown``) instead of hiding the others."""
    from lanenb.sweeps import attach, list_sweeps

    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise UserError(f"limit={limit!r}: must be an integer from 1 to {MAX_LIST_LIMIT}")
    rows: list[payloads.SweepSummary] = []
    for name in list_sweeps()[::-1][:limit]:
        try:
            rows.append(cast(payloads.SweepSummary, attach(name).summary()))
        except Exception as exc:  # one broken study must not hide the others
            rows.append({"name": name, "state": "unknown", "trials_total": None, "trials_done": None,
                         "trials_running": None, "best": None, "objective": None, "sampler": None,
                         "pruner": None, "error": f"{type(exc).__name__}: {exc}"})
    return rows


def sweep_detail(name: str) -> payloads.SweepDetail:
    """``Sweep.detail()`` (trials table rows, best trial, settings with the base job redacted)
    and ``charts``: the sweep chart of ``%lanesweep`` (``lanenb.charts.specs.sweep_chart``, values
    inline), one spec per part, for the sidebar's Vega renderer.

    Raises:
        UserError: ``name`` is not a sweep name (the message says what one may hold).
        SweepNotFoundError: no sweep is called ``name``.
    """
    from lanenb.charts.specs import report_panels, sweep_chart
    from lanenb.sweeps import attach

    sweep = attach(name)
    info = sweep.detail()
    objective = info["objective"]
    searched = [(d["name"], bool(d.get("log"))) for d in info["settings"]["space"]]
    chart = sweep_chart(info["trials"], sweep.curves(), objective["label"], objective["direction"] == "maximize",
                        searched)
    info["charts"] = report_panels(chart)
    return cast(payloads.SweepDetail, info)


def stop_sweep(name: str, confirm: Any, wait: float = SWEEP_STOP_WAIT_S) -> payloads.SweepStopReply:
    """Stop sweep ``name`` (``Sweep.stop``: its driver cancels the running trials through the Job
    API); ``confirm`` must repeat the name, as for a job.

    Returns:
        ``{"name", "state"}``: ``stopped`` once the driver has gone, ``stopping`` while it still
        cancels after ``wait`` seconds, or the state it had (``finished``) when nothing ran.

    Raises:
        ConfirmationError: ``confirm`` is not the sweep's name; nothing was stopped.
        SweepNotFoundError: no sweep is called ``name``.
    """
    from lanenb.sweeps import attach

    sweep = attach(name)
    _check_confirmed("sweep", name, confirm)
    state = sweep.state
    if state in ("running", "stopping"):  # a sweep without a driver has nothing to stop: no stop file left
        state = sweep.stop(timeout=wait)
    return {"name": name, "state": state}


# ---------------------------------------------------------------------------- snapshots

def _store(backend: Any, namespace: Any) -> Any:
    """The snapshot store a request names; the request's own mistakes are ``UserError``s that
    name the parameter (a ``namespace`` for the local store was a TypeError, a 500)."""
    from lanenb.snapshots import available_stores, get_store, store_takes_namespace

    if not isinstance(backend, str) or not backend:
        raise UserError(f"backend={backend!r}: must be the name of a snapshot store (local, kubernetes)")
    if namespace is not None and not isinstance(namespace, str):
        raise UserError(f"namespace={namespace!r}: must be a Kubernetes namespace name")
    if namespace and not store_takes_namespace(backend):
        takes = ", ".join(n for n in available_stores() if store_takes_namespace(n))
        raise UserError(f"namespace={namespace!r}: the {backend!r} snapshot store has no namespaces "
                        f"(the stores that take one: {takes})")
    return get_store(backend, **({"namespace": namespace} if namespace else {}))


def list_snapshots(volume: str | None = None, job: str | None = None, backend: str = "local",
                   namespace: str | None = None) -> list[payloads.Snapshot]:
    """Snapshots newest first, each with the job that made it (registry link or label)."""
    from lanenb.commands.snapshots import registry_links, snapshot_job

    links = registry_links()
    out: list[payloads.Snapshot] = []
    for snap in _store(backend, namespace).list(volume or None):
        item = cast(payloads.Snapshot, snap.to_dict())
        made_by = snapshot_job(snap, links)
        item["job"] = None if made_by == "-" else made_by
        if job and item["job"] != job:
            continue
        out.append(item)
    out.sort(key=lambda s: s["created"], reverse=True)
    return out


def diff_snapshots(a: str, b: str, backend: str = "local",
                   namespace: str | None = None) -> payloads.SnapshotDiff:
    """Files added, removed and changed from snapshot ``a`` to ``b``.

    Raises:
        SnapshotNotFoundError: ``a`` or ``b`` is unknown.
        SnapshotNotSupportedError: the store cannot diff (Kubernetes).
    """
    if not a or not b:
        raise UserError(f"diff needs two snapshot ids, got a={a!r} b={b!r}")
    result = _store(backend, namespace).diff(a, b)
    return {"a": result.a, "b": result.b, "summary": result.summary(),
            "changes": [cast(payloads.FileChange, vars(c)) for c in result.changes]}


def _local_target(new_volume: Any, root_dir: str | os.PathLike, allow_hidden: bool) -> str:
    """A restore target inside the server's root directory (as Jupyter's file browser sees it),
    and outside hidden folders unless the server allows hidden files, as its contents API does.
    The check is on the resolved path, so a visible link to a hidden folder is refused too."""
    if not isinstance(new_volume, str) or not new_volume.strip():
        raise UserError(f"new_volume={new_volume!r}: give the name of a new directory")
    root = Path(root_dir).expanduser().resolve()
    target = (root / new_volume.strip()).resolve()
    if target == root or root not in target.parents:
        raise UserError(f"new_volume={new_volume!r}: must be a new directory inside the server's root "
                        f"directory {str(root)!r}")
    hidden = [part for part in target.relative_to(root).parts if part.startswith(".")]
    if hidden and not allow_hidden:
        raise HiddenTargetError(f"new_volume={new_volume!r}: {str(target.relative_to(root))!r} is a hidden path "
                                f"({hidden[0]!r}) and this server does not allow hidden files "
                                f"(ContentsManager.allow_hidden is False); choose a name without a leading '.'")
    return str(target)


def restore_snapshot(id: str, new_volume: Any, *, root_dir: str | os.PathLike, allow_hidden: bool = False,
                     backend: str = "local", namespace: str | None = None) -> payloads.RestoreReply:
    """Restore snapshot ``id`` into ``new_volume``, which must not exist (never overwrites).

    Locally ``new_volume`` is a directory relative to the server's root directory; on
    Kubernetes it is the new PVC's name.

    Args:
        allow_hidden: the server's ``ContentsManager.allow_hidden``: whether a local target may
            be or lie under a hidden folder (``.ipython/profile_default/startup``).

    Raises:
        TargetExistsError: ``new_volume`` exists; nothing was changed.
        SnapshotNotFoundError: ``id`` is unknown.
        HiddenTargetError: a hidden local target while ``allow_hidden`` is False.
        UserError: ``new_volume`` is empty or leaves the root directory.
    """
    if backend == "local":
        target = _local_target(new_volume, root_dir, allow_hidden)
    elif not isinstance(new_volume, str) or not new_volume.strip():
        raise UserError(f"new_volume={new_volume!r}: give the name of a new PVC")
    else:
        target = new_volume.strip()
    volume = _store(backend, namespace).restore(id, target)
    return {"id": id, "volume": volume}


# ---------------------------------------------------------------------------- team
def team_view(namespaces: list[str] | None = None, context: str | None = None) -> dict[str, Any]:
    """The sidebar's Team section: every lanenb MPIJob the server's credentials may read, GPU
    capacity, quotas and what RBAC refused (``lanenb.team.TeamView.to_dict``). Served from one
    watching collector per cluster and namespace set, so every sidebar's refresh reads memory."""
    from lanenb.team import team_view as view

    return view(context=context, namespaces=namespaces or None).to_dict()


def stop_team_job(namespace: str, name: str, confirm: Any, uid: str | None = None,
                  context: str | None = None) -> dict[str, Any]:
    """Stop a team's job: only with ``confirm`` = its name, only where RBAC allows the delete."""
    from lanenb.team import stop_team_job as stop

    return stop(namespace, name, confirm, uid=uid, context=context)
