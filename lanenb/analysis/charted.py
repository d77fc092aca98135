"""What ``%lanescale`` and ``%lanecompare`` reports share: a table and one chart, the chart's
PNG drawn once, and the outputs a notebook shows.

Why a base class: both reports carry a Vega-Lite chart (``lanenb.charts.specs``) beside their
table; the MIME bundle, the PNG cache and the outputs were the same lines twice. Reports draw
nothing in the kernel's display machinery themselves (only ``lanenb.notebook`` imports IPython):
``%load_ext lanenb`` registers :meth:`ChartedReport.outputs` as their display.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from lanenb.tables import Table

__all__ = ["ChartedReport"]


class ChartedReport:
    """A report with a table and one chart. Subclasses give :meth:`chart` and :meth:`table`
    (whose ``png``/``chart`` come from :meth:`png_or_reason` and :meth:`chart_output`)."""

    def chart(self) -> dict[str, Any]:
        raise NotImplementedError

    def table(self) -> Table:
        raise NotImplementedError

    def chart_output(self) -> dict[str, Any]:
        """``{MIME type: chart}`` for :class:`~lanenb.tables.Table`'s ``chart``."""
        from lanenb.charts.specs import REPORT_MIME

        return {REPORT_MIME: self.chart()}

    @cached_property
    def _png(self) -> bytes:
        from lanenb.charts.specs import to_png

        return to_png(self.chart())

    def png(self) -> bytes:
        """The chart as PNG (Vega's own renderer, in a process of its own; drawn once per report).

        Raises:
            RuntimeError: the renderer failed (vl-convert missing or broken).
        """
        return self._png

    def png_or_reason(self) -> tuple[bytes | None, str | None]:
        """``(PNG, None)``, or ``(None, why there is no image)``: a report without its picture
        still shows, and says why."""
        try:
            return self.png(), None
        except (RuntimeError, ValueError) as exc:
            return None, f"no static chart image: {exc}"

    def outputs(self) -> list[dict[str, Any]]:
        """The notebook outputs that show the report: the table, then the chart."""
        return self.table().outputs()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.table().mimebundle()
