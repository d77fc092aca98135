"""Compare runs: which settings differ, which run is better, where the curves part.

``compare(["lane-a", "lane-b"])`` folds each job's events into a ``RunState`` (the same reducer
the live view uses, so running jobs compare too, local or Kubernetes) and returns a table: the
spec fields that differ (highlighted), final and best metrics, duration, images/s and snapshot
ids, plus loss and validation-accuracy curves overlaid.
"""

from __future__ import annotations

import html
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

from lanenb_trainer.errors import UserError

from .jobs import Job, RunState, get_job
from .jobs.runstate import format_duration

__all__ = ["Comparison", "compare", "CompareError"]

# fields that say how a run was launched, not what it trained: left out of "differences"
_NOT_SETTINGS = {"name", "run_dir", "k8s"}


class CompareError(UserError, ValueError):
    """Fewer than two runs, or a run that does not exist; the message names it."""


def _state(job: Job) -> tuple[RunState, list[str], float | None]:
    state = RunState()
    snapshots: list[str] = []
    ips: list[float] = []
    for update in job.updates(follow=False):
        state.apply(update)
        ev = update.event
        if ev is None:
            continue
        if ev.kind == "snapshot":
            snapshots.append(str(ev.get("snapshot") or ev.get("name") or ev.get("pvc_name") or "requested"))
        elif ev.kind == "step" and ev.get("images_per_s") is not None:
            ips.append(float(ev.get("images_per_s")))
    return state, snapshots, (statistics.median(ips) if ips else None)


@dataclass
class Comparison:
    """Runs side by side; ``rows`` is one dict per run, ``differences`` the spec fields that differ."""

    jobs: list[Job]
    states: dict[str, RunState] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    def png(self) -> bytes:
        from lanenb.notebook.charts import render_compare

        return render_compare(self.states)

    def _columns(self) -> list[str]:
        return (["run", "backend", "state"] + self.differences
                + ["test acc", "test FP", "test FN", "best val acc (epoch)", "duration", "images/s", "snapshots"])

    def _cells(self, row: dict[str, Any]) -> list[str]:
        def num(v: Any, fmt: str = "{:.4f}") -> str:
            return "-" if v is None else fmt.format(v)

        best = row["best"] or {}
        best_txt = "-" if best.get("accuracy") is None else f"{best['accuracy']:.4f} ({best.get('epoch')})"
        return ([row["run"], row["backend"], row["state"]] + [str(row["spec"].get(d)) for d in self.differences]
                + [num(row["test_accuracy"]), num(row["test_fp"]), num(row["test_fn"]), best_txt,
                   "-" if row["duration_s"] is None else format_duration(row["duration_s"]),
                   num(row["images_per_s"], "{:.1f}"), ", ".join(row["snapshots"]) or "-"])

    def _repr_html_(self) -> str:
        import base64

        cols = self._columns()
        diff = set(self.differences)
        head = "".join(f"<th style='{'background:#fff3cd' if c in diff else ''}'>{html.escape(c)}</th>" for c in cols)
        body = ""
        for row in self.rows:
            cells = self._cells(row)
            body += "<tr>" + "".join(
                f"<td style='text-align:right;{'background:#fff3cd' if c in diff else ''}'>{html.escape(v)}</td>"
                for c, v in zip(cols, cells)) + "</tr>"
        img = base64.b64encode(self.png()).decode()
        note = ("highlighted: settings that differ" if self.differences else "the runs have the same settings")
        return (f"<table><tr>{head}</tr>{body}</table><small>{note}</small><br>"
                f"<img src='data:image/png;base64,{img}'/>")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        import base64

        return {"text/html": self._repr_html_(), "text/plain": repr(self),
                "image/png": base64.b64encode(self.png()).decode()}

    def __repr__(self) -> str:
        rows = [self._columns()] + [self._cells(r) for r in self.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        if self.differences:
            lines.append("settings that differ: " + ", ".join(self.differences))
        return "\n".join(lines)


def compare(runs: Sequence[str | Job]) -> Comparison:
    """Compare two or more runs (names or ``Job`` s), finished or still running.

    Raises:
        CompareError: fewer than two runs, the same run twice, or an unknown name.
    """
    if isinstance(runs, (str, Job)) or len(runs) < 2:
        raise CompareError(f"runs={runs!r}: give two or more job names to compare")
    jobs: list[Job] = []
    for item in runs:
        if isinstance(item, Job):
            jobs.append(item)
            continue
        try:
            jobs.append(get_job(str(item)))
        except UserError:
            raise CompareError(f"no job named {item!r}; %lanejobs lists the jobs") from None
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise CompareError(f"runs={names!r}: a run is named twice")
    specs = {j.name: j.spec.to_dict() for j in jobs}
    keys = sorted({k for s in specs.values() for k in s} - _NOT_SETTINGS)
    differences = [k for k in keys if len({repr(s.get(k)) for s in specs.values()}) > 1]
    result = Comparison(jobs, differences=differences)
    for job in jobs:
        state, snapshots, ips = _state(job)
        result.states[job.name] = state
        metrics = job.metrics or {}
        test = state.test or (metrics.get("test") if isinstance(metrics.get("test"), dict) else None) or {}
        duration = state.duration_s if state.duration_s is not None else metrics.get("duration_s")
        result.rows.append({
            "run": job.name, "backend": job.backend_name, "state": state.state, "spec": specs[job.name],
            "test_accuracy": test.get("accuracy"), "test_fp": test.get("fp"), "test_fn": test.get("fn"),
            "best": state.best, "duration_s": duration, "images_per_s": ips, "snapshots": snapshots,
            "val": dict(state.val),
        })
    return result
