"""One job-summary row for every face.

``%lanejobs``' table, ``lanenb jobs list`` and the JupyterLab sidebar's jobs list show the same
facts about a job (state, progress, ETA, accuracy, age, ...). They are computed here, once, from
a reduced ``RunState``; each face only formats the row (text columns, JSON, a list item), so a
new field or a changed rule (when an ETA is shown, which accuracy is the headline) is one edit.

The row is plain JSON-able values: numbers stay numbers (``progress`` 0..1, ``eta_s`` and
``age_s`` in seconds) so a face can choose its own wording.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from lanenb.analysis.doctor import shown_verdict
from lanenb.analysis.runstate import RunState, tail_state

if TYPE_CHECKING:
    from lanenb.jobs.job import Job

__all__ = ["job_summary", "job_summaries", "error_summary", "utilisation", "SPARK_POINTS"]

SPARK_POINTS = 30  # utilisation samples per job (the sidebar's sparkline)


def utilisation(state: RunState, points: int = SPARK_POINTS) -> dict[str, Any]:
    """The newest system samples of the lowest rank: GPU utilisation when the rank has a GPU,
    else CPU percent (what a sparkline of "is it busy" draws)."""
    if not state.system:
        return {"metric": None, "values": [], "last": {}}
    rank = min(state.system)
    table = state.system[rank]
    metric = "gpu_util" if "gpu_util" in table else "cpu_percent" if "cpu_percent" in table else None
    values = table[metric].y[-points:] if metric else []
    last = {k: v for k, v in state.system_last.get(rank, {}).items() if k in ("gpu_util", "cpu_percent", "t")}
    return {"metric": metric, "rank": rank, "values": values, "last": last}


def _age(job: Job, now: float | None) -> float | None:
    created = job.created
    if not created:
        return None
    return (time.time() if now is None else now) - created


def job_summary(job: Job, state: RunState, *, now: float | None = None) -> dict[str, Any]:
    """The summary row of ``job`` whose reduced state is ``state``.

    Args:
        job: the job (its name, backend, creation time and run directory come from here).
        state: its ``RunState``: ``tail_state(job)`` for a table of many jobs, a server's
            shared state, or one holding only the recorded status (a listing that reads no log).
        now: the clock for ``age_s`` (UNIX seconds; default the current time).

    Returns:
        ``name``, ``backend``, ``created``, ``age_s``, ``run_dir``; ``state``, ``reason`` and
        ``status`` (the state with its reason, as tables show it); ``progress`` (0..1),
        ``step``, ``total_steps``, ``eta_s`` (only while running); ``accuracy`` with
        ``accuracy_split`` ("test" or "val") and ``accuracy_label`` (which model: "best.pt,
        epoch 6"); ``headline`` (``Headline.to_dict()``: the figure, its label, ``text`` and the
        other test model's figure, or None); ``loss``, ``summary`` (one status line),
        ``final`` (nothing will change any more), ``utilisation``, ``error`` (None);
        ``verdict`` (``Verdict.to_dict()``: ``kind``, ``line`` "input-bound: ranks wait 41% of
        each step for data; ...", ``severity``...; None when the one rule of ``shown_verdict``
        says a view shows none) and ``breakdown`` (per rank, as a string key: the shares of
        data / compute / exchange / other and ``step_s``).
    """
    found = state.headline()
    acc = None if found is None else found.accuracy
    verdict = shown_verdict(state)
    return {
        "name": job.name, "backend": job.backend_name, "created": job.created, "age_s": _age(job, now),
        "run_dir": job.run_dir,
        "state": state.state, "reason": state.reason,
        "status": state.state + (f" ({state.reason})" if state.reason and state.state != "running" else ""),
        "progress": state.progress, "step": state.step, "total_steps": state.total_steps,
        "eta_s": state.eta_s if state.state == "running" else None,
        "accuracy": acc, "accuracy_split": None if found is None else found.split,
        "accuracy_label": None if found is None else found.label,
        "headline": None if found is None else found.to_dict(),
        "loss": state.loss, "summary": state.summary(), "final": state.finished or state.state == "lost",
        "utilisation": utilisation(state), "error": None,
        "verdict": None if verdict is None else verdict.to_dict(),
        "breakdown": {str(r): v for r, v in state.breakdown().items()},
    }


def error_summary(job: Job, exc: BaseException, *, now: float | None = None) -> dict[str, Any]:
    """The row of a job whose state could not be read (an unreachable cluster): state
    ``unknown`` and the error, with every other field empty, so one broken job is shown
    rather than hiding the others."""
    error = f"{type(exc).__name__}: {exc}"
    return {
        "name": job.name, "backend": job.backend_name, "created": job.created, "age_s": _age(job, now),
        "run_dir": job.run_dir, "state": "unknown", "reason": None, "status": f"unknown ({error})",
        "progress": None, "step": None, "total_steps": None, "eta_s": None, "accuracy": None,
        "accuracy_split": None, "accuracy_label": None, "headline": None, "loss": None, "summary": None, "final": False,
        "utilisation": {"metric": None, "values": [], "last": {}}, "error": error,
        "verdict": None, "breakdown": {},
    }


def job_summaries(jobs: Iterable[Job], read_state: Callable[[Job], RunState] = tail_state, *,
                  now: float | None = None) -> list[dict[str, Any]]:
    """``job_summary`` of each job in order, its state read by ``read_state`` (default
    ``tail_state``: the status and the last lines of the log, cheap for many jobs); a job
    whose state cannot be read gets ``error_summary``."""
    now = time.time() if now is None else now
    rows = []
    for job in jobs:
        try:
            rows.append(job_summary(job, read_state(job), now=now))
        except Exception as exc:  # one broken job must not hide the others
            rows.append(error_summary(job, exc, now=now))
    return rows
