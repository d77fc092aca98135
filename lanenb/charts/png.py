"""The dataset preview's histograms as PNG bytes, drawn with matplotlib's object API (no pyplot).
Every other chart (a run's panels, ``%lanescale``, ``%lanecompare``) is Vega-Lite
(``lanenb.charts.specs``).

Why ``Figure`` + Agg rather than pyplot: these may be drawn from a background thread, and
pyplot's global state is not thread-safe; a ``Figure`` rendered under one lock is.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: matplotlib is imported when a chart is drawn
    from matplotlib.figure import Figure

__all__ = ["render_histogram", "png_bytes"]

_LOCK = threading.Lock()  # matplotlib's text/font caches are shared: one render at a time
_DPI = 72


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG at the charts' resolution: one encoding for the widget and the saved notebook."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    return buf.getvalue()


def render_histogram(counts: Sequence[int], labels: Sequence[str], title: str, xlabel: str) -> bytes:
    """A bar chart (e.g. lanes per frame), for the dataset preview."""
    with _LOCK:
        fig = _figure(4.8, 3.0)
        ax = fig.subplots()
        ax.bar(list(labels), list(counts), color="C0")
        for i, c in enumerate(counts):
            ax.text(i, c, str(c), ha="center", va="bottom", fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("frames")
        ax.set_title(title, fontsize=10)
        return png_bytes(fig)
