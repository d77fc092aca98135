"""Charts of a run as PNG bytes, drawn with matplotlib's object API (no pyplot).

Why PNG from ``Figure`` + Agg rather than pyplot or ipympl: the live view redraws from a
background thread, and pyplot's global state is not thread-safe; a ``Figure`` owned by one
view and rendered under one lock is. The same bytes serve the live ``Image`` widget and the
static image a headless run (papermill, nbconvert, GitHub) keeps in the saved notebook.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: matplotlib is imported when a chart is drawn, analysis sits above
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from lanenb.analysis.runstate import RunState
    from lanenb.analysis.scaling import ScalingReport
    from lanenb.analysis.series import BucketSeries

__all__ = ["render_run", "render_breakdown", "render_histogram", "render_scaling", "png_bytes", "STEP_PARTS"]

# the parts of a step as every face draws them (name, colour): the per-rank stacked bars here,
# the scaling chart and the sidebar's bars (extension/src/charts.ts uses the same colours)
STEP_PARTS = (("data", "#ef6c00"), ("compute", "#2e7d32"), ("exchange", "#c62828"), ("other", "#9e9e9e"))

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


def _band(ax: Axes, series: BucketSeries, label: str, colour: str | None = None) -> None:
    line, = ax.plot(series.x, series.y, label=label, color=colour, lw=1.4)
    if series.width > 1:  # buckets of several samples: show their spread
        ax.fill_between(series.x, series.ymin, series.ymax, color=line.get_color(), alpha=0.2, lw=0)


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def render_run(state: RunState, title: str = "", verdict: str | None = None) -> bytes:
    """Four panels: loss + LR per step, val accuracy/FP/FN per epoch, throughput, per-rank
    GPU utilisation and memory (CPU % and RSS on ranks without a GPU); once the ranks report
    step timing, a fifth beside them: where each rank's step goes (data / compute / exchange /
    other), titled with the doctor's ``verdict`` line when given."""
    breakdown = state.breakdown()
    with _LOCK:
        if breakdown:
            fig = _figure(15.0, 6.4)
            grid = fig.add_gridspec(2, 3, width_ratios=[1.0, 1.0, 0.62])
            a_loss, a_val = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
            a_tput, a_sys = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
            _render_breakdown(fig.add_subplot(grid[:, 2]), breakdown, state.hosts, verdict)
        else:
            fig = _figure(11.0, 6.4)
            (a_loss, a_val), (a_tput, a_sys) = fig.subplots(2, 2)
        if title:
            fig.suptitle(title, fontsize=11)
        # loss and learning rate
        if "loss" in state.series and len(state.series["loss"]):
            _band(a_loss, state.series["loss"], "loss", "C0")
            a_loss.set_xlabel("step")
            a_loss.set_ylabel("loss")
            if "lr" in state.series and len(state.series["lr"]):
                a_lr = a_loss.twinx()
                a_lr.plot(state.series["lr"].x, state.series["lr"].y, color="C1", lw=1, ls="--", label="LR")
                a_lr.set_ylabel("learning rate", color="C1")
                a_lr.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
            a_loss.set_title("training loss (LR dashed)", fontsize=10)
        else:
            _empty(a_loss, "loss: waiting for the first step")
        # validation per epoch
        names = [("val_accuracy", "accuracy", "C2"), ("val_fp", "FP", "C3"), ("val_fn", "FN", "C4")]
        if any(n in state.epochs_hist and len(state.epochs_hist[n]) for n, _, _ in names):
            for name, label, colour in names:
                s = state.epochs_hist.get(name)
                if s is not None and len(s):
                    a_val.plot([x + 1 for x in s.x], s.y, marker="o", label=label, color=colour)
            # the run's headline test figure and the other model's, each labelled with its model
            # (the same figures and words as the status line and %lanejobs)
            headline = state.headline()
            if headline is not None and headline.split == "test":
                for scored, style in ((headline.primary, ":"), (headline.other, "-.")):
                    if scored is not None and scored.accuracy is not None:
                        a_val.axhline(scored.accuracy, color="C2", ls=style, lw=1,
                                      label=f"test acc {scored.accuracy:.3f} ({scored.label})")
            a_val.set_ylim(-0.02, 1.02)
            a_val.set_xlabel("epoch")
            a_val.legend(fontsize=8, loc="center right")
            a_val.set_title("validation (TuSimple accuracy / FP / FN)", fontsize=10)
        else:
            _empty(a_val, "validation: after the first epoch")
        # throughput
        if "images_per_s" in state.series and len(state.series["images_per_s"]):
            _band(a_tput, state.series["images_per_s"], "images/s", "C5")
            a_tput.set_xlabel("step")
            a_tput.set_ylabel("images/s (all ranks)")
            a_tput.set_title("throughput", fontsize=10)
        else:
            _empty(a_tput, "throughput: waiting for the first step")
        # per-rank system
        _render_system(a_sys, state)
        return png_bytes(fig)


def _render_system(ax: Axes, state: RunState) -> None:
    ranks = sorted(state.system)
    if not ranks:
        _empty(ax, "per-rank system: waiting for samples")
        return
    gpu = any("gpu_util" in state.system[r] for r in ranks)
    util, mem = ("gpu_util", "gpu_mem_mb") if gpu else ("cpu_percent", "rss_mb")
    t0 = min((state.system[r][util].x[0] for r in ranks if util in state.system[r] and len(state.system[r][util])),
             default=0.0)
    a_mem = ax.twinx()
    for r in ranks:
        table = state.system[r]
        if util in table and len(table[util]):
            ax.plot([x - t0 for x in table[util].x], table[util].y, color=f"C{r % 10}", lw=1.3, label=f"rank {r}")
        if mem in table and len(table[mem]):
            a_mem.plot([x - t0 for x in table[mem].x], table[mem].y, color=f"C{r % 10}", lw=1, ls=":")
    ax.set_xlabel("seconds")
    ax.set_ylabel("GPU utilisation %" if gpu else "CPU % (100 = one core)")
    a_mem.set_ylabel("GPU memory MiB (dotted)" if gpu else "RSS MiB (dotted)")
    ax.legend(fontsize=8, loc="upper left", ncol=min(4, len(ranks)))
    ax.set_title("per rank: " + ("GPU utilisation and memory" if gpu else "CPU and memory (no GPU)"), fontsize=10)


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


def _render_breakdown(ax: Axes, breakdown: Mapping[int, Mapping[str, float]], hosts: Mapping[int, str],
                      verdict: str | None) -> None:
    ranks = sorted(breakdown)
    labels = [f"rank {r}" + (f"\n{hosts[r]}" if hosts.get(r) and len(set(hosts.values())) > 1 else "")
              for r in ranks]
    _stacked(ax, labels, [breakdown[r] for r in ranks], horizontal=True)
    for i, r in enumerate(ranks):
        ax.annotate(f"{breakdown[r]['step_s']:.3g} s/step", (1.0, i), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=8, annotation_clip=False)
    ax.xaxis.set_major_formatter("{x:.0%}")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=4, frameon=False)
    title = "where a step goes, per rank (last timing windows)"
    if verdict:
        import textwrap

        title += "\n" + textwrap.fill(verdict, 48)
    ax.set_title(title, fontsize=9, loc="left")


def render_breakdown(breakdown: Mapping[int, Mapping[str, float]], hosts: Mapping[int, str] | None = None,
                     verdict: str | None = None) -> bytes:
    """The per-rank stacked bar alone (``RunState.breakdown()``): data / compute / exchange /
    other shares of each rank's step, with its seconds per step and the verdict as title."""
    with _LOCK:
        fig = _figure(5.2, 1.8 + 0.35 * max(5, len(breakdown)))
        ax = fig.subplots()
        if breakdown:
            _render_breakdown(ax, breakdown, hosts or {}, verdict)
        else:
            _empty(ax, "step timing: waiting for the first window")
        return png_bytes(fig)


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
