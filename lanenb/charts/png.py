"""Report charts as PNG bytes, drawn with matplotlib's object API (no pyplot): the dataset
histograms, ``%lanescale`` and ``%lanecompare``. A run's live charts are Vega-Lite
(``lanenb.charts.specs``).

Why ``Figure`` + Agg rather than pyplot: these may be drawn from a background thread, and
pyplot's global state is not thread-safe; a ``Figure`` rendered under one lock is.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from lanenb.charts.specs import STEP_COLOURS

if TYPE_CHECKING:  # types only: matplotlib is imported when a chart is drawn, analysis sits above
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from lanenb.analysis.runstate import RunState
    from lanenb.analysis.scaling import ScalingReport

__all__ = ["render_histogram", "render_scaling", "render_compare", "png_bytes", "STEP_PARTS"]

# the parts of a step as every face draws them (name, colour): the scaling chart's bars here,
# the run view's Vega-Lite "breakdown" panel (specs.STEP_COLOURS)
STEP_PARTS = tuple(STEP_COLOURS.items())

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


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _stacked(ax: Axes, labels: Sequence[str], shares: Sequence[Mapping[str, float] | None],
             horizontal: bool) -> None:
    """One stacked bar per label (shares of data / compute / exchange / other, 0..1), each
    part labelled with its percentage when wide enough to read; a None bar is left empty."""
    pos = list(range(len(labels)))
    start = [0.0] * len(labels)
    for part, colour in STEP_PARTS:
        sizes = [float(s.get(part, 0.0)) if s else 0.0 for s in shares]
        if horizontal:
            ax.barh(pos, sizes, left=start, color=colour, label=part, height=0.6)
        else:
            ax.bar(pos, sizes, bottom=start, color=colour, label=part, width=0.6)
        for i, size in enumerate(sizes):
            if size >= 0.08:
                x, y = (start[i] + size / 2, i) if horizontal else (i, start[i] + size / 2)
                ax.text(x, y, f"{size:.0%}", ha="center", va="center", fontsize=8, color="white")
        start = [a + b for a, b in zip(start, sizes)]
    if horizontal:
        ax.set_yticks(pos, list(labels))
        ax.set_xlim(0, 1)
        ax.set_ylim(max(len(labels), 5) - 0.5, -0.5)  # rank 0 on top; a few ranks keep slim bars
    else:
        ax.set_xticks(pos, list(labels))
        ax.set_ylim(0, 1)


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


def render_scaling(report: ScalingReport) -> bytes:
    """Speed-up against ideal per rank count, and images/s (a ``lanenb.analysis.scaling.ScalingReport``)."""
    rows = report.rows()
    split = any(r.get("breakdown") for r in rows)
    with _LOCK:
        fig = _figure(13.5 if split else 9.0, 3.4)
        if split:
            a_speed, a_ips, a_split = fig.subplots(1, 3)
        else:
            a_speed, a_ips = fig.subplots(1, 2)
        ranks = [r["processes"] for r in rows]
        a_speed.plot(ranks, [r["ideal"] for r in rows], ls="--", color="grey", label="ideal")
        a_speed.plot(ranks, [r["speedup"] for r in rows], marker="o", color="C0", label="measured")
        for r in rows:
            a_speed.annotate(f"{r['efficiency']:.0%}", (r["processes"], r["speedup"]), textcoords="offset points",
                             xytext=(4, -12), fontsize=8)
        a_speed.set_xlabel("ranks")
        a_speed.set_ylabel(f"speed-up vs {ranks[0]} rank(s)")
        a_speed.set_xticks(ranks)
        a_speed.legend(fontsize=8)
        a_speed.set_title(f"{report.mode} scaling (labels: efficiency)", fontsize=10)
        a_ips.bar([str(n) for n in ranks], [r["images_per_s"] for r in rows], color="C2")
        a_ips.set_xlabel("ranks")
        a_ips.set_ylabel("images/s (all ranks)")
        a_ips.set_title("throughput", fontsize=10)
        if split:  # what stopped the next rank count from helping
            _stacked(a_split, [str(n) for n in ranks], [r.get("breakdown") for r in rows], horizontal=False)
            a_split.set_xlabel("ranks")
            a_split.set_ylabel("share of a step (mean over ranks)")
            a_split.yaxis.set_major_formatter("{x:.0%}")
            a_split.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
            a_split.set_title("where a step goes", fontsize=10)
        return png_bytes(fig)


def render_compare(states: dict[str, RunState]) -> bytes:
    """Loss per step and validation accuracy per epoch of several runs, overlaid."""
    with _LOCK:
        fig = _figure(10.0, 3.4)
        a_loss, a_acc = fig.subplots(1, 2)
        for i, (name, s) in enumerate(states.items()):
            colour = f"C{i % 10}"
            if "loss" in s.series and len(s.series["loss"]):
                a_loss.plot(s.series["loss"].x, s.series["loss"].y, color=colour, lw=1.2, label=name)
            acc = s.epochs_hist.get("val_accuracy")
            if acc is not None and len(acc):
                a_acc.plot([x + 1 for x in acc.x], acc.y, marker="o", color=colour, label=name)
        a_loss.set_xlabel("step")
        a_loss.set_ylabel("training loss")
        a_loss.set_title("loss", fontsize=10)
        a_acc.set_xlabel("epoch")
        a_acc.set_ylabel("val accuracy")
        a_acc.set_title("validation accuracy", fontsize=10)
        for ax in (a_loss, a_acc):
            if ax.lines:
                ax.legend(fontsize=7)
            else:
                _empty(ax, "no data yet")
        return png_bytes(fig)
