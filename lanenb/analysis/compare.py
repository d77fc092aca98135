"""Compare runs: which settings differ, which run is better, where the curves part.

``compare(["lane-a", "lane-b"])`` folds each job's events into a ``RunState`` (the same reducer
the live view uses, so running jobs compare too, local or Kubernetes) and returns a table: the
spec fields that differ (highlighted), final and best metrics, duration, images/s and snapshot
ids, plus loss and validation-accuracy curves overlaid.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lanenb.analysis.charted import ChartedReport
from lanenb.analysis.runstate import RunState, fill_tests, format_duration
from lanenb.jobs import Job, get_job
from lanenb.tables import Table
from lanenb_trainer.epochs import epoch_number, epoch_text
from lanenb_trainer.errors import UserError

__all__ = ["Comparison", "compare", "CompareError"]

# fields that say how a run was launched, not what it trained: left out of "differences"
_NOT_SETTINGS = {"name", "run_dir", "backend_options"}


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
            name = str(ev.get("snapshot") or ev.get("name") or ev.get("pvc_name") or "requested")
            snapshots.append(f"{name} (failed)" if ev.get("status") == "failed" else name)
        elif ev.kind == "step" and ev.get("images_per_s") is not None:
            ips.append(float(ev.get("images_per_s")))
    return state, snapshots, (statistics.median(ips) if ips else None)


@dataclass
class Comparison(ChartedReport):
    """Runs side by side; ``rows`` is one dict per run, ``differences`` the spec fields that differ."""

    jobs: list[Job]
    states: dict[str, RunState] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    def chart(self) -> dict[str, Any]:
        """The runs' loss per step and validation accuracy per epoch, overlaid (Vega-Lite, values inline)."""
        from lanenb.charts.specs import compare_chart

        runs = {}
        for name, s in self.states.items():
            loss, acc = s.series.get("loss"), s.epochs_hist.get("val_accuracy")
            runs[name] = {"step": list(loss.x) if loss is not None else [],
                          "loss": list(loss.y) if loss is not None else [],
                          "epoch": [float(epoch_number(int(x))) for x in acc.x] if acc is not None else [],
                          "val_accuracy": list(acc.y) if acc is not None else []}
        return compare_chart(runs)

    def _columns(self) -> list[str]:
        return (["run", "backend", "state"] + self.differences
                + ["test acc (model)", "test FP", "test FN", "best val acc (epoch)", "duration", "images/s",
                   "snapshots"])

    def _cells(self, row: dict[str, Any]) -> list[str]:
        def num(v: Any, fmt: str = "{:.4f}") -> str:
            return "-" if v is None else fmt.format(v)

        best = row["best"] or {}
        best_txt = "-" if best.get("accuracy") is None else f"{best['accuracy']:.4f} ({epoch_text(best.get('epoch'))})"
        return ([row["run"], row["backend"], row["state"]] + [str(row["spec"].get(d)) for d in self.differences]
                + [row["test_cell"] or "-", num(row["test_fp"]), num(row["test_fn"]), best_txt,
                   "-" if row["duration_s"] is None else format_duration(row["duration_s"]),
                   num(row["images_per_s"], "{:.1f}"), ", ".join(row["snapshots"]) or "-"])

    def table(self) -> Table:
        """The comparison as a table (settings that differ highlighted) with the overlaid curves."""
        note = ("highlighted: settings that differ (" + ", ".join(self.differences) + ")" if self.differences
                else "the runs have the same settings")
        png, why = self.png_or_reason()
        return Table(self._columns(), [self._cells(r) for r in self.rows], highlight=set(self.differences),
                     note=note + (f"\n{why}" if why else ""), png=png, chart=self.chart_output())

    def __repr__(self) -> str:
        return self.table().text()


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
        fill_tests(state, metrics)  # the headline of metrics.json where the log had no test event
        found = state.headline()
        test = found.primary.to_dict() if found is not None and found.split == "test" else {}
        duration = state.duration_s if state.duration_s is not None else metrics.get("duration_s")
        result.rows.append({
            "run": job.name, "backend": job.backend_name, "state": state.state, "spec": specs[job.name],
            "test_accuracy": test.get("accuracy"), "test_fp": test.get("fp"), "test_fn": test.get("fn"),
            "test_model": test.get("label"),
            "test_other": None if found is None or found.other is None else found.other.to_dict(),
            "test_cell": found.short() if found is not None and test else None,
            "best": state.best, "duration_s": duration, "images_per_s": ips, "snapshots": snapshots,
            "val": dict(state.val),
        })
    return result
