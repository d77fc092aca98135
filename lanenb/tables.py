"""One small table for notebook outputs (``%lanejobs``, scaling reports, run comparisons): HTML in
JupyterLab, aligned text elsewhere, and an optional chart: a Vega-Lite spec that JupyterLab draws
interactively, carried with its PNG so a headless run (papermill, GitHub) keeps the picture too."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Table"]


@dataclass
class Table:
    """``columns`` and ``rows`` of strings; ``highlight`` names columns to shade (e.g. the
    settings that differ between runs); ``title``/``note`` go above/below; ``png`` below all."""

    columns: list[str]
    rows: list[list[str]]
    highlight: set[str] = field(default_factory=set)
    title: str = ""
    note: str = ""
    png: bytes | None = None
    empty: str = "(nothing to show)"
    chart: dict[str, Any] | None = None  # {MIME type: chart}, e.g. {charts.specs.REPORT_MIME: Vega-Lite spec}

    def html(self) -> str:
        if not self.rows:
            return f"<i>{html.escape(self.empty)}</i>"

        def style(col: str) -> str:
            return "background:#fff3cd;" if col in self.highlight else ""

        head = "".join(f"<th style='text-align:left;{style(c)}'>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td style='text-align:left;{style(c)}'>{html.escape(v)}</td>"
                                        for c, v in zip(self.columns, row)) + "</tr>" for row in self.rows)
        out = f"<b>{html.escape(self.title)}</b>" if self.title else ""
        out += f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        if self.note:
            out += f"<small>{html.escape(self.note).replace(chr(10), '<br>')}</small><br>"
        if self.png:
            out += f"<img src='data:image/png;base64,{base64.b64encode(self.png).decode()}'/>"
        return out

    def text(self) -> str:
        if not self.rows:
            return self.empty
        table = [self.columns] + self.rows
        widths = [max(len(r[i]) for r in table) for i in range(len(self.columns))]
        lines = [self.title] if self.title else []
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def mimebundle(self) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/html": self.html(), "text/plain": self.text()}
        if self.png:
            bundle["image/png"] = base64.b64encode(self.png).decode()
        return bundle

    # How IPython shows a table wherever it is returned, displayed or updated in place (IPython
    # calls these; this module imports nothing of it): the HTML, aligned text for consoles.
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, **kwargs: Any) -> dict[str, Any]:
        return self.mimebundle()

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        """The aligned text, not the dataclass's field dump (a console, a log line, ``print``)."""
        return self.text()

    def chart_bundle(self) -> dict[str, Any] | None:
        """The chart as its own output: the Vega-Lite spec (JupyterLab draws it: tooltips, legend
        toggles), its PNG for every other viewer, a line of text for consoles."""
        if self.chart is None:
            return None
        bundle: dict[str, Any] = {**self.chart, "text/plain": f"<chart: {self.title or 'report'}>"}
        if self.png:
            bundle["image/png"] = base64.b64encode(self.png).decode()
        return bundle

    def outputs(self) -> list[dict[str, Any]]:
        """The MIME bundles to show, in order: the table, then the chart as an output of its own
        (one output shows one MIME type, and JupyterLab prefers the table's HTML to a chart).
        Without a chart, the table alone (its PNG, if any, inside)."""
        chart = self.chart_bundle()
        if chart is None:
            return [self.mimebundle()]
        plain = replace(self, png=None)  # the PNG goes with the chart, not twice
        return [{"text/html": plain.html(), "text/plain": plain.text()}, chart]
