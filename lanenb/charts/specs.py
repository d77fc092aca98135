"""The run's charts as Vega-Lite specs: one definition per panel for every face.

Why Vega-Lite: a chart is a JSON document, so the same definition is drawn interactively by
the notebook's live view (the ``LiveCharts`` widget) and the sidebar's job panel (both through
``extension/src/vegacharts.ts``: hover values, zoom and pan, legend toggles, a log-scale switch
for the loss), and as a static PNG for headless runs and reports by ``vl-convert`` (Vega's own
renderer in one wheel, no browser). The specs name their datasets (``{"data": {"name":
"loss"}}``) and carry no values: the live faces stream rows into a dataset with Vega change
sets instead of re-drawing the chart; ``with_values`` inlines rows for a static render. Why
not bqplot/ipympl: they live in the kernel only and the sidebar would need a second chart
definition; why not uPlot: its options are JavaScript (formatters are functions), so Python
could not write them. Measurements in docs/ARCHITECTURE.md.

Rows are written by ``lanenb.analysis.chartdata`` (from the one reducer, ``RunState``); every
row has a key ``k`` so a face can tell a changed row from a new one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["SCHEMA", "PANELS", "panel", "run_panels", "with_values", "concat", "to_png", "STEP_COLOURS"]

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"

# the parts of a step, coloured as every face draws them (png.STEP_PARTS is the same table)
STEP_COLOURS = {"data": "#ef6c00", "compute": "#2e7d32", "exchange": "#c62828", "other": "#9e9e9e"}
_RANKS = "category10"
_WIDTH, _HEIGHT = 340, 150
_FONT = {"labelFontSize": 10, "titleFontSize": 10}


def _base(name: str, title: str, subtitle: str | None = None) -> dict[str, Any]:
    head: dict[str, Any] = {"text": title, "anchor": "start", "fontSize": 12}
    if subtitle:
        head["subtitle"] = subtitle
        head["subtitleFontSize"] = 10
    # resize: the live faces stream rows in after the first layout, so axis labels and legends
    # grow later; without it Vega keeps the empty chart's layout and clips them
    return {"$schema": SCHEMA, "title": head, "width": _WIDTH, "height": _HEIGHT,
            "autosize": {"type": "pad", "resize": True},
            "usermeta": {"lanenb": {"panel": name}}, "config": {"axis": _FONT, "legend": _FONT}}


def _q(field: str, title: str, **extra: Any) -> dict[str, Any]:
    return {"field": field, "type": "quantitative", "title": title, **extra}


def _legend_toggle(name: str, field: str) -> dict[str, Any]:
    """A click on a legend entry shows that series alone (shift-click adds one): W&B's toggle."""
    return {"name": f"{name}_show", "select": {"type": "point", "fields": [field]}, "bind": "legend"}


def _shown(name: str) -> dict[str, Any]:
    return {"condition": {"param": f"{name}_show", "value": 1}, "value": 0.12}


def _zoom(name: str) -> dict[str, Any]:
    """Wheel to zoom the x axis, drag to pan, double-click to reset."""
    return {"name": f"{name}_zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}


def _hover_rule(name: str, x: dict[str, Any], tooltip: list[dict[str, Any]]) -> dict[str, Any]:
    """A vertical rule at the x nearest the pointer whose tooltip lists every value there."""
    return {
        "params": [{"name": f"{name}_hover", "select": {"type": "point", "fields": [x["field"]], "nearest": True,
                                                         "on": "pointerover", "clear": "pointerout"}}],
        "mark": {"type": "rule", "color": "#888"},
        "encoding": {"x": x, "opacity": {"condition": {"param": f"{name}_hover", "empty": False, "value": 0.6},
                                         "value": 0},
                     "tooltip": tooltip},
    }


def _loss() -> dict[str, Any]:
    spec = _base("loss", "training loss and learning rate", "per step; band: min-max of the merged steps")
    x = _q("step", "step")
    colour = {"field": "series", "type": "nominal", "title": None,
              "scale": {"domain": ["loss", "LR"], "range": ["#1f77b4", "#ff7f0e"]}}
    loss_y = _q("value", "loss", scale={"type": "linear", "zero": False})
    spec["data"] = {"name": "loss"}
    spec["usermeta"]["lanenb"]["log_axis"] = "loss"
    spec["layer"] = [
        {"transform": [{"filter": "datum.series === 'loss'"}], "layer": [
            {"mark": {"type": "area", "opacity": 0.18, "color": "#1f77b4"},
             "encoding": {"x": x, "y": {**loss_y, "field": "lo"}, "y2": {"field": "hi"},
                          "opacity": _shown("loss")}},
            {"params": [_legend_toggle("loss", "series"), _zoom("loss")],
             "mark": {"type": "line", "strokeWidth": 1.5},
             "encoding": {"x": x, "y": loss_y, "color": colour, "opacity": _shown("loss")}},
        ]},
        {"transform": [{"filter": "datum.series === 'LR'"}],
         "mark": {"type": "line", "strokeDash": [4, 3], "strokeWidth": 1.2},
         "encoding": {"x": x, "y": _q("value", "learning rate", axis={"orient": "right", "format": ".1e"}),
                      "color": colour, "opacity": _shown("loss")}},
        {"transform": [{"pivot": "series", "value": "value", "groupby": ["step"]}],
         **_hover_rule("loss", x, [_q("step", "step", format=","), _q("loss", "loss", format=".4f"),
                                   _q("LR", "learning rate", format=".3e")])},
    ]
    spec["resolve"] = {"scale": {"y": "independent"}}
    return spec


def _validation() -> dict[str, Any]:
    spec = _base("validation", "validation (TuSimple accuracy / FP / FN)",
                 "per epoch; dotted: the test accuracy of each model")
    x = _q("epoch", "epoch", axis={"tickMinStep": 1, "format": "d"})
    y = _q("value", "share of lane points", scale={"domain": [0, 1]}, axis={"format": "%"})
    colour = {"field": "metric", "type": "nominal", "title": None,
              "scale": {"domain": ["accuracy", "FP", "FN"], "range": ["#2ca02c", "#d62728", "#9467bd"]}}
    spec["layer"] = [
        {"data": {"name": "validation"}, "layer": [
            {"params": [_legend_toggle("validation", "metric"), _zoom("validation")],
             "mark": {"type": "line", "point": True},
             "encoding": {"x": x, "y": y, "color": colour, "opacity": _shown("validation"),
                          "tooltip": [{"field": "metric", "title": "metric"}, _q("epoch", "epoch"),
                                      _q("value", "value", format=".4f")]}},
        ]},
        {"data": {"name": "tests"}, "layer": [
            {"mark": {"type": "rule", "strokeDash": [2, 2], "color": "#2ca02c"},
             "encoding": {"y": {**y, "field": "accuracy"}, "tooltip": [{"field": "label", "title": "test"}]}},
            # the labels stacked at mid-height on the right, clear of accuracy (top) and FP/FN (bottom)
            {"transform": [{"calculate": f"{_HEIGHT // 2} - 13 * datum.slot", "as": "ypx"}],
             "mark": {"type": "text", "align": "right", "fontSize": 10, "color": "#2ca02c"},
             "encoding": {"y": {"field": "ypx", "type": "quantitative", "scale": None},
                          "x": {"value": _WIDTH - 4}, "text": {"field": "label"}}},
        ]},
    ]
    return spec


def _throughput() -> dict[str, Any]:
    spec = _base("throughput", "throughput", "images per second over all ranks; band: min-max")
    x = _q("step", "step")
    y = _q("value", "images/s (all ranks)", scale={"zero": False})
    spec["data"] = {"name": "throughput"}
    spec["layer"] = [
        {"mark": {"type": "area", "opacity": 0.2, "color": "#8c564b"},
         "encoding": {"x": x, "y": {**y, "field": "lo"}, "y2": {"field": "hi"}}},
        {"params": [_zoom("throughput")], "mark": {"type": "line", "color": "#8c564b", "strokeWidth": 1.5},
         "encoding": {"x": x, "y": y}},
        _hover_rule("throughput", x, [_q("step", "step", format=","), _q("value", "images/s", format=".1f"),
                                      _q("lo", "min", format=".1f"), _q("hi", "max", format=".1f")]),
    ]
    return spec


def _per_rank(name: str, title: str, y_title: str, y_extra: Mapping[str, Any]) -> dict[str, Any]:
    spec = _base(name, title, "per rank over time; click a rank in the legend to show it alone")
    x = _q("t", "seconds since the first sample", axis={"format": ",.0f"})
    spec["data"] = {"name": name}
    spec["layer"] = [
        {"params": [_legend_toggle(name, "rank"), _zoom(name)],
         "mark": {"type": "line", "strokeWidth": 1.3, "interpolate": "monotone"},
         "encoding": {"x": x, "y": _q("value", y_title, **y_extra),
                      "color": {"field": "rank", "type": "nominal", "title": None, "scale": {"scheme": _RANKS}},
                      "opacity": _shown(name)}},
        {"params": [{"name": f"{name}_hover", "select": {"type": "point", "nearest": True, "on": "pointerover",
                                                          "encodings": ["x", "color"], "clear": "pointerout"}}],
         "mark": {"type": "point", "filled": True, "size": 40},
         "encoding": {"x": x, "y": _q("value", y_title, **y_extra),
                      "color": {"field": "rank", "type": "nominal", "title": None, "scale": {"scheme": _RANKS}},
                      "opacity": {"condition": {"param": f"{name}_hover", "empty": False, "value": 1}, "value": 0},
                      "tooltip": [{"field": "rank", "title": "rank"}, _q("t", "seconds", format=",.1f"),
                                  _q("value", y_title, format=",.1f")]}},
    ]
    return spec


def _breakdown() -> dict[str, Any]:
    spec = _base("breakdown", "where a step goes, per rank", "last timing windows: data / compute / exchange / other")
    spec["height"] = {"step": 22}
    spec["data"] = {"name": "breakdown"}
    spec["mark"] = {"type": "bar"}
    spec["encoding"] = {
        "y": {"field": "rank", "type": "nominal", "title": None, "sort": {"field": "rank_no"}},
        "x": _q("share", "share of a step", stack="normalize", axis={"format": "%"}),
        "color": {"field": "part", "type": "nominal", "title": None, "sort": list(STEP_COLOURS),
                  "scale": {"domain": list(STEP_COLOURS), "range": list(STEP_COLOURS.values())}},
        "order": {"field": "order"},
        "tooltip": [{"field": "rank", "title": "rank"}, {"field": "part", "title": "part"},
                    _q("share", "share", format=".0%"), _q("step_s", "seconds per step", format=".3g")],
    }
    return spec


_BUILDERS = {
    "loss": _loss,
    "validation": _validation,
    "throughput": _throughput,
    "gpu_util": lambda: _per_rank("gpu_util", "GPU utilisation", "GPU utilisation (%)",
                                  {"scale": {"domain": [0, 100]}}),
    "gpu_mem": lambda: _per_rank("gpu_mem", "GPU memory", "GPU memory (MiB)", {}),
    "cpu": lambda: _per_rank("cpu", "CPU (no GPU on these ranks)", "CPU % (100 = one core)", {}),
    "rss": lambda: _per_rank("rss", "memory (RSS)", "resident memory (MiB)", {}),
    "breakdown": _breakdown,
}
PANELS: tuple[str, ...] = tuple(_BUILDERS)


def panel(name: str) -> dict[str, Any]:
    """One panel's spec (a fresh copy: callers may change it).

    Raises:
        ValueError: ``name`` is not one of ``PANELS``.
    """
    try:
        return _BUILDERS[name]()
    except KeyError:
        raise ValueError(f"chart panel {name!r}: must be one of {', '.join(PANELS)}") from None


def run_panels(gpu: bool, breakdown: bool) -> list[str]:
    """The panels of a run's view: loss, validation, throughput, per-rank GPU (or CPU) use and
    memory, and the per-rank step split once the ranks report timing."""
    names = ["loss", "validation", "throughput"] + (["gpu_util", "gpu_mem"] if gpu else ["cpu", "rss"])
    return names + (["breakdown"] if breakdown else [])


def _datasets(spec: Any) -> Iterable[dict[str, Any]]:
    if isinstance(spec, dict):
        data = spec.get("data")
        if isinstance(data, dict) and "name" in data:
            yield data
        for value in spec.values():
            yield from _datasets(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from _datasets(value)


def with_values(spec: Mapping[str, Any], rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """A copy of ``spec`` whose named datasets hold ``rows[name]`` inline (empty when absent):
    what a static renderer needs."""
    out = copy.deepcopy(dict(spec))
    for data in list(_datasets(out)):
        data["values"] = list(rows.get(data.pop("name"), []))
    return out


def concat(specs: Sequence[Mapping[str, Any]], columns: int = 3, title: str | None = None) -> dict[str, Any]:
    """Several panel specs in one grid (a static image of the whole view)."""
    parts = []
    for spec in specs:
        part = {k: v for k, v in spec.items() if k not in ("$schema", "config", "autosize")}
        parts.append(part)
    out: dict[str, Any] = {"$schema": SCHEMA, "columns": columns, "concat": parts, "autosize": {"type": "pad"},
                           "config": {"axis": _FONT, "legend": _FONT}, "resolve": {"scale": {"color": "independent"}}}
    if title:
        out["title"] = {"text": title, "anchor": "start", "fontSize": 13}
    return out


def to_png(spec: Mapping[str, Any], scale: float = 1.0, timeout: float = 120.0) -> bytes:
    """A spec with inline values as PNG bytes, drawn by Vega itself (``vl-convert``) in a
    process of its own (``lanenb.charts.vlpng``), so the caller's GIL stays free.

    Raises:
        ValueError: the spec is not valid Vega-Lite (vl-convert's message).
        RuntimeError: the renderer failed or took longer than ``timeout`` seconds.
    """
    import json
    import subprocess
    import sys

    argv = [sys.executable, "-m", "lanenb.charts.vlpng", "--scale", str(scale)]
    try:
        done = subprocess.run(argv, input=json.dumps(spec).encode(), capture_output=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"chart renderer took over {timeout:g} s") from None
    if done.returncode == 2:
        raise ValueError(done.stderr.decode(errors="replace").strip())
    if done.returncode != 0 or not done.stdout.startswith(b"\x89PNG"):
        raise RuntimeError(f"chart renderer failed (exit {done.returncode}): "
                           f"{done.stderr.decode(errors='replace').strip()[-500:]}")
    return done.stdout
