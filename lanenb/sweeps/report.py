"""A sweep as a report: the trials table and the sweep's chart (each trial's validation curve,
the best so far, the objective against each searched parameter), interactive in JupyterLab
and as a PNG for headless viewers, drawn by the same machinery as ``%lanecompare``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lanenb.analysis.charted import ChartedReport
from lanenb.tables import Table

if TYPE_CHECKING:
    from lanenb.sweeps.sweep import Sweep

__all__ = ["SweepReport"]


class SweepReport(ChartedReport):
    """The sweep as it was when the report was made (call ``Sweep.report()`` again for news)."""

    def __init__(self, sweep: Sweep, *, sized: str | None = None) -> None:
        """``sized``: the line saying the winner's learning rate at another size (``Sweep.report(
        processes=...)``), shown under the table."""
        self.sweep = sweep
        self.sized = sized
        self.trials = [r.to_dict() for r in sweep.trials() if r.state != "waiting"]
        self.curves = sweep.curves()
        self._table = sweep.table()

    def chart(self) -> dict[str, Any]:
        from lanenb.charts.specs import sweep_chart

        objective = self.sweep.objective
        params = [(d["name"], bool(d.get("log"))) for d in self.sweep.settings.space]
        return sweep_chart(self.trials, self.curves, objective.label, objective.direction == "maximize", params)

    def table(self) -> Table:
        png, reason = self.png_or_reason()
        note = "\n".join(x for x in (self._table.note, self.sized, reason) if x)
        return Table(self._table.columns, self._table.rows, title=self._table.title, note=note, png=png,
                     empty=self._table.empty, chart=self.chart_output())
