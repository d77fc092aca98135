"""``LiveCharts``: a run's Vega-Lite panels as one widget, drawn by the lanenb lab extension.

The widget holds the panel specs (``lanenb.charts.specs``) and the latest rows per dataset
(``lanenb.analysis.chartdata``). The frontend (``extension/src/widget.ts``, the same renderer
as the sidebar's job panel) turns each new set of rows into Vega change sets, so hover, zoom
and legend toggles survive every update and nothing is re-drawn whole. Rows are bounded
(``chartdata.LIMIT`` points per series), so an update costs the same on day one and day five.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import traitlets

from lanenb.analysis.chartdata import Rows, run_rows, run_specs
from lanenb.analysis.runstate import RunState
from lanenb.version import __version__

__all__ = ["LiveCharts", "MODULE_VERSION"]

MODULE_VERSION = __version__  # the lab extension's too (extension/src/version.ts, from the same source)


class LiveCharts(widgets.DOMWidget):
    """Interactive charts of a run: hover for values, wheel to zoom, drag to pan, double-click
    to reset, click a legend entry to show that series alone, a log switch for the loss.

    Args:
        state: the run to draw now (more with ``show_state``).
        **kwargs: passed to ``ipywidgets.DOMWidget`` (``layout`` ...).
    """

    _model_name = traitlets.Unicode("LiveChartsModel").tag(sync=True)
    _model_module = traitlets.Unicode("lanenb").tag(sync=True)
    _model_module_version = traitlets.Unicode(MODULE_VERSION).tag(sync=True)
    _view_name = traitlets.Unicode("LiveChartsView").tag(sync=True)
    _view_module = traitlets.Unicode("lanenb").tag(sync=True)
    _view_module_version = traitlets.Unicode(MODULE_VERSION).tag(sync=True)
    specs = traitlets.List(traitlets.Dict()).tag(sync=True)
    rows = traitlets.Dict().tag(sync=True)

    def __init__(self, state: RunState | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if state is not None:
            self.show_state(state)

    def show_state(self, state: RunState) -> Rows:
        """Draw ``state``: new panels when the run needs other ones (a GPU appears, timing
        starts), new rows for the datasets that changed.

        Returns:
            The rows now shown.
        """
        rows = run_rows(state)
        self.draw(run_specs(state), rows)
        return rows

    def draw(self, specs: list[dict[str, Any]], rows: Rows) -> None:
        """Show these panel specs and rows (``run_specs``/``run_rows`` of a state read under
        its owner's lock): the frontend applies only what changed."""
        with self.hold_sync():
            if specs != self.specs:
                self.specs = specs
            if rows != self.rows:
                self.rows = rows
