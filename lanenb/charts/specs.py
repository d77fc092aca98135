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
could not write them. Measurements in docs/architecture/base-tools.md.

Rows are written by ``lanenb.analysis.chartdata`` (from the one reducer, ``RunState``); every
row has a key ``k`` so a face can tell a changed row from a new one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["SCHEMA", "PANELS", "REPORT_MIME", "panel", "run_panels", "with_values", "datasets", "concat", "to_png",
           "STEP_COLOURS", "RESUMES", "ZOOM_EVENTS", "scaling_chart", "compare_chart", "sweep_chart", "report_panels"]

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"

# the parts of a step, coloured as every face draws them
STEP_COLOURS = {"data": "#ef6c00", "compute": "#2e7d32", "exchange": "#c62828", "other": "#9e9e9e"}
_RANKS = "category10"
# the dataset of the rules marking where a run resumed (``chartdata.resume_rows``), drawn by
# every panel whose x axis is the run's progress (loss, validation, throughput)
RESUMES = "resumes"
_RESUME_COLOURS = {"resume": "#757575", "resize": "#6a1b9a"}
_WIDTH, _HEIGHT = 340, 150
_FONT = {"labelFontSize": 10, "titleFontSize": 10}
# the number axes' labels: d3's automatic precision, insignificant zeros trimmed ("~"): a domain of
# one value (a single sample, a constant series) has no tick step, and Vega then wrote "0.000000"
_CONFIG = {"axis": _FONT, "axisQuantitative": {"format": ",~f"}, "legend": _FONT}
# an axis that counts (seconds, epochs, trials): a label at whole numbers only; on a short span
# Vega puts ticks at 0.2 or 0.5 steps (tickMinStep only asks it for fewer), which a whole-number
# format wrote "0 0 0 1 1 1"
_WHOLE = {"tickMinStep": 1, "labelExpr": "datum.value % 1 ? '' : datum.label"}


def _base(name: str, title: str, subtitle: str | None = None) -> dict[str, Any]:
    head: dict[str, Any] = {"text": title, "anchor": "start", "fontSize": 12}
    if subtitle:
        head["subtitle"] = subtitle
        head["subtitleFontSize"] = 10
    # resize: the live faces stream rows in after the first layout, so axis labels and legends
    # grow later; without it Vega keeps the empty chart's layout and clips them
    return {"$schema": SCHEMA, "title": head, "width": _WIDTH, "height": _HEIGHT,
            "autosize": {"type": "pad", "resize": True},
            "usermeta": {"lanenb": {"panel": name}}, "config": copy.deepcopy(_CONFIG)}


def _q(field: str, title: str, **extra: Any) -> dict[str, Any]:
    return {"field": field, "type": "quantitative", "title": title, **extra}


def _legend_toggle(name: str, field: str) -> dict[str, Any]:
    """A click on a legend entry shows that series alone (shift-click adds one): W&B's toggle."""
    return {"name": f"{name}_show", "select": {"type": "point", "fields": [field]}, "bind": "legend"}


def _shown(name: str) -> dict[str, Any]:
    return {"condition": {"param": f"{name}_show", "value": 1}, "value": 0.12}


# zoom with Ctrl (Cmd on a Mac) + wheel, or a trackpad's pinch (which the browser sends as one):
# a plain wheel over a chart scrolls the page or the sidebar it is in, as everywhere else
ZOOM_EVENTS = "wheel![event.ctrlKey || event.metaKey]"


def _zoom(name: str) -> dict[str, Any]:
    """Ctrl/Cmd + wheel to zoom the x axis, drag to pan, double-click to reset. The live faces
    (``extension/src/vegacharts.ts``) keep zoom and pan inside the data's range."""
    return {"name": f"{name}_zoom", "select": {"type": "interval", "encodings": ["x"], "zoom": ZOOM_EVENTS},
            "bind": "scales"}


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


def _resume_rules(x: dict[str, Any]) -> dict[str, Any]:
    """Dashed vertical rules where the run resumed (purple where it resumed on another number of
    ranks), with a marker at the top whose tooltip says what it cost ("resumed: 3 steps lost;
    resized 2 -> 1 ranks"). Its own dataset, so the curves stay one line each; drawn last, above
    the hover layer, so the marker gets the pointer."""
    colour = {"condition": {"test": "datum.kind === 'resize'", "value": _RESUME_COLOURS["resize"]},
              "value": _RESUME_COLOURS["resume"]}
    tooltip = [_q("step", "resumed at step", format=","), {"field": "label", "title": "resume"}]
    return {"data": {"name": RESUMES}, "layer": [
        {"mark": {"type": "rule", "strokeDash": [5, 4], "strokeWidth": 1.5, "opacity": 0.8},
         "encoding": {"x": x, "color": colour, "tooltip": tooltip}},
        {"mark": {"type": "point", "shape": "triangle-down", "filled": True, "size": 50},
         "encoding": {"x": x, "y": {"value": 5}, "color": colour, "tooltip": tooltip}},  # inside the clip
    ]}


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
        _resume_rules(x),
    ]
    spec["resolve"] = {"scale": {"y": "independent"}}
    return spec


def _validation() -> dict[str, Any]:
    spec = _base("validation", "validation (TuSimple accuracy / FP / FN)",
                 "per epoch; dotted: the test accuracy of each model")
    x = _q("epoch", "epoch", axis={**_WHOLE, "format": "d"})
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
        _resume_rules(x),
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
        _resume_rules(x),
    ]
    return spec


def _per_rank(name: str, title: str, y_title: str, y_extra: Mapping[str, Any]) -> dict[str, Any]:
    spec = _base(name, title, "per rank over time; click a rank in the legend to show it alone")
    x = _q("t", "seconds since the first sample", axis={**_WHOLE, "format": ",.0f"})  # whole seconds, once each
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


def datasets(spec: Any) -> Iterable[dict[str, Any]]:
    """Every ``{"name": ...}`` data entry of a spec, at any depth."""
    if isinstance(spec, dict):
        data = spec.get("data")
        if isinstance(data, dict) and "name" in data:
            yield data
        for value in spec.values():
            yield from datasets(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from datasets(value)


def with_values(spec: Mapping[str, Any], rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """A copy of ``spec`` whose named datasets hold ``rows[name]`` inline (empty when absent):
    what a static renderer needs."""
    out = copy.deepcopy(dict(spec))
    for data in list(datasets(out)):
        data["values"] = list(rows.get(data.pop("name"), []))
    return out


def concat(specs: Sequence[Mapping[str, Any]], columns: int = 3, title: str | None = None) -> dict[str, Any]:
    """Several panel specs in one grid (a static image of the whole view)."""
    parts = []
    for spec in specs:
        part = {k: v for k, v in spec.items() if k not in ("$schema", "config", "autosize")}
        parts.append(part)
    out: dict[str, Any] = {"$schema": SCHEMA, "columns": columns, "concat": parts, "autosize": {"type": "pad"},
                           "config": copy.deepcopy(_CONFIG), "resolve": {"scale": {"color": "independent"}}}
    if title:
        out["title"] = {"text": title, "anchor": "start", "fontSize": 13}
    return out


# Reports (%lanescale, %lanecompare) go out as this MIME type: JupyterLab draws it itself
# (its Vega 5 renderer: tooltips, legend), other viewers fall back to the PNG beside it
REPORT_MIME = "application/vnd.vegalite.v5+json"
_REPORT_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"


def _report(parts: list[dict[str, Any]], title: str, *, shared_colour: bool = False) -> dict[str, Any]:
    for part in parts:  # titles at the left, as the live panels' are
        part["title"] = {**part["title"], "anchor": "start", "fontSize": 12, "subtitleFontSize": 10}
    return {"$schema": _REPORT_SCHEMA, "title": {"text": title, "anchor": "start", "fontSize": 13},
            "hconcat": parts, "autosize": {"type": "pad"}, "config": copy.deepcopy(_CONFIG),
            "resolve": {"scale": {"color": "shared" if shared_colour else "independent"}}}


def report_panels(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each chart of a report (``sweep_chart``, ``compare_chart``...) as a spec of its own, in the
    live panels' schema and named by its title (``usermeta.lanenb.panel``): a narrow face (the
    sidebar) lets them wrap one under another instead of scrolling one wide row sideways."""
    out = []
    for part in report.get("hconcat", ()):
        spec = copy.deepcopy(dict(part))
        title = spec.get("title", {})
        name = title.get("text", "chart") if isinstance(title, Mapping) else str(title)
        out.append({"$schema": SCHEMA, **spec, "autosize": {"type": "pad"},
                    "usermeta": {"lanenb": {"panel": name}}, "config": copy.deepcopy(report.get("config", {}))})
    return out


_RANKS_AXIS = {"field": "ranks", "type": "ordinal", "title": "ranks", "axis": {"labelAngle": 0}}


def scaling_chart(rows: Sequence[Mapping[str, Any]], mode: str) -> dict[str, Any]:
    """A scaling report's chart, values inline: speed-up against ideal per rank count (labels:
    efficiency), throughput, and (when the runs reported timing) where a step goes.

    Args:
        rows: ``ScalingReport.rows()``.
        mode: ``weak`` or ``strong``, for the title.
    """
    points = [{"ranks": r["processes"], "measured": r["speedup"], "ideal": r["ideal"],
               "efficiency": r["efficiency"], "images_per_s": r["images_per_s"],
               "exchange": r.get("exchange_share"), "job": r.get("job")} for r in rows]
    base = rows[0]["processes"] if rows else 1
    x = _q("ranks", "ranks", axis={"values": [p["ranks"] for p in points], "format": "d"})
    tooltip = [_q("ranks", "ranks", format="d"), _q("images_per_s", "images/s", format=",.1f"),
               _q("measured", "speed-up", format=".2f"), _q("efficiency", "efficiency", format=".0%"),
               _q("exchange", "exchange + contention", format=".0%"), {"field": "job", "title": "run"}]
    speed = {"title": {"text": f"speed-up vs {base} rank(s)", "subtitle": "labels: efficiency; dashed: ideal"},
             "width": 260, "height": 190, "data": {"values": points}, "layer": [
                 {"mark": {"type": "line", "strokeDash": [5, 4], "color": "#888"},
                  "encoding": {"x": x, "y": _q("ideal", "speed-up")}},
                 {"mark": {"type": "line", "point": {"size": 60, "filled": True}, "color": "#1f77b4"},
                  "encoding": {"x": x, "y": _q("measured", "speed-up"), "tooltip": tooltip}},
                 {"mark": {"type": "text", "dx": 6, "dy": 12, "align": "left", "fontSize": 10},
                  "encoding": {"x": x, "y": _q("measured", "speed-up"),
                               "text": {"field": "efficiency", "type": "quantitative", "format": ".0%"}}},
             ]}
    throughput = {"title": {"text": "throughput", "subtitle": "images per second over all ranks"},
                  "width": 200, "height": 190, "data": {"values": points}, "mark": {"type": "bar", "color": "#2ca02c"},
                  "encoding": {"x": _RANKS_AXIS,
                               "y": _q("images_per_s", "images/s (all ranks)"), "tooltip": tooltip}}
    parts = [speed, throughput]
    split = [{"ranks": r["processes"], "part": part, "share": share, "order": list(STEP_COLOURS).index(part)}
             for r in rows for part, share in (r.get("breakdown") or {}).items() if part in STEP_COLOURS]
    if split:  # what stopped the next rank count from helping
        parts.append({"title": {"text": "where a step goes", "subtitle": "share of a step, mean over ranks"},
                      "width": 200, "height": 190, "data": {"values": split}, "mark": "bar",
                      "encoding": {"x": _RANKS_AXIS,
                                   "y": _q("share", "share of a step", stack="normalize", axis={"format": "%"}),
                                   "color": {"field": "part", "type": "nominal", "title": None,
                                             "sort": list(STEP_COLOURS),
                                             "scale": {"domain": list(STEP_COLOURS),
                                                       "range": list(STEP_COLOURS.values())}},
                                   "order": {"field": "order"},
                                   "tooltip": [_q("ranks", "ranks", format="d"), {"field": "part", "title": "part"},
                                               _q("share", "share", format=".0%")]}})
    return _report(parts, f"{mode} scaling")


def compare_chart(runs: Mapping[str, Mapping[str, Sequence[float]]]) -> dict[str, Any]:
    """A comparison's chart, values inline: each run's training loss per step and validation
    accuracy per epoch, overlaid; a legend click shows one run alone.

    Args:
        runs: per run name, ``{"step": [...], "loss": [...], "epoch": [...], "val_accuracy": [...]}``.
    """
    loss = [{"run": name, "step": x, "loss": y} for name, r in runs.items()
            for x, y in zip(r.get("step", ()), r.get("loss", ()))]
    acc = [{"run": name, "epoch": x, "accuracy": y} for name, r in runs.items()
           for x, y in zip(r.get("epoch", ()), r.get("val_accuracy", ()))]
    colour = {"field": "run", "type": "nominal", "title": None, "scale": {"scheme": _RANKS},
              "sort": list(runs)}
    show = {"name": "runs_show", "select": {"type": "point", "fields": ["run"]}, "bind": "legend"}
    shown = {"condition": {"param": "runs_show", "value": 1}, "value": 0.12}
    loss_part = {"title": {"text": "training loss", "subtitle": "per step"}, "width": 340, "height": 190,
                 "data": {"values": loss}, "params": [show, _zoom("loss")],
                 "mark": {"type": "line", "strokeWidth": 1.4},
                 "encoding": {"x": _q("step", "step"), "y": _q("loss", "loss", scale={"zero": False}),
                              "color": colour, "opacity": shown,
                              "tooltip": [{"field": "run", "title": "run"}, _q("step", "step", format=","),
                                          _q("loss", "loss", format=".4f")]}}
    acc_part = {"title": {"text": "validation accuracy", "subtitle": "per epoch"}, "width": 260, "height": 190,
                "data": {"values": acc}, "mark": {"type": "line", "point": True},
                "encoding": {"x": _q("epoch", "epoch", axis={**_WHOLE, "format": "d"}),
                             "y": _q("accuracy", "accuracy", scale={"zero": False}, axis={"format": ".1%"}),
                             "color": colour,
                             "tooltip": [{"field": "run", "title": "run"}, _q("epoch", "epoch", format="d"),
                                         _q("accuracy", "accuracy", format=".4f")]}}
    if not acc:  # runs without validation: say so rather than draw empty axes
        acc_part = {"title": {"text": "validation accuracy"}, "width": 260, "height": 190,
                    "data": {"values": [{"t": "no validation in these runs"}]},
                    "mark": {"type": "text", "fontSize": 11, "color": "#888"}, "encoding": {"text": {"field": "t"}}}
    return _report([loss_part, acc_part], "runs compared", shared_colour=True)


def sweep_chart(trials: Sequence[Mapping[str, Any]], curves: Mapping[int, Mapping[int, float]], objective: str,
                maximize: bool, params: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    """A sweep's chart, values inline: every trial's objective per epoch overlaid (pruned trials
    dashed), the best-so-far curve over the trials, and the objective against each searched
    parameter (up to three; log axes where the space is searched on a log scale).

    Args:
        trials: ``TrialRow.to_dict()`` rows.
        curves: per trial number, ``{epoch: value}``.
        objective: its label (``val.accuracy``).
        maximize: the direction, for the best-so-far curve.
        params: ``(name, log scale)`` of each searched parameter.
    """
    state = {t["number"]: t["state"] for t in trials}
    points = [{"trial": str(n), "epoch": e, "value": v, "pruned": state.get(n) == "pruned"}
              for n, per_epoch in curves.items() for e, v in sorted(per_epoch.items())]
    best, running = [], None
    for t in sorted(trials, key=lambda t: t["number"]):
        if t["state"] == "complete" and t["value"] is not None:
            better = running is None or (t["value"] > running if maximize else t["value"] < running)
            running = t["value"] if better else running
        best.append({"trial": t["number"], "best": running, "value": t["value"], "state": t["state"]})
    y = _q("value", objective, scale={"zero": False})
    curves_part = {"title": {"text": "each trial", "subtitle": f"{objective} per epoch; dashed: pruned"},
                   "width": 300, "height": 190, "data": {"values": points},
                   "mark": {"type": "line", "point": True, "strokeWidth": 1.4},
                   "encoding": {"x": _q("epoch", "epoch", axis={**_WHOLE, "format": "d"}), "y": y,
                                "color": {"field": "trial", "type": "nominal", "title": "trial"},
                                "strokeDash": {"field": "pruned", "type": "nominal", "legend": None,
                                               "scale": {"domain": [False, True], "range": [[1, 0], [4, 3]]}},
                                "tooltip": [{"field": "trial", "title": "trial"}, _q("epoch", "epoch", format="d"),
                                            _q("value", objective, format=".4f")]}}
    best_part = {"title": {"text": "best so far", "subtitle": "line: best finished trial; points: every trial"},
                 "width": 220, "height": 190, "data": {"values": best}, "layer": [
                     {"mark": {"type": "line", "interpolate": "step-after", "color": "#2ca02c"},
                      "encoding": {"x": _q("trial", "trial", axis={**_WHOLE, "format": "d"}),
                                   "y": _q("best", objective, scale={"zero": False})}},
                     {"mark": {"type": "point", "filled": True, "size": 50},
                      "encoding": {"x": _q("trial", "trial"), "y": _q("value", objective),
                                   "color": {"field": "state", "type": "nominal", "title": None},
                                   "tooltip": [_q("trial", "trial", format="d"), {"field": "state"},
                                               _q("value", objective, format=".4f")]}}]}
    parts = [curves_part, best_part]
    for name, log in list(params)[:3]:
        values = [{"x": t["params"].get(name), "value": t["value"], "state": t["state"], "trial": t["number"]}
                  for t in trials if t["value"] is not None and t["params"].get(name) is not None]
        numeric = all(isinstance(v["x"], (int, float)) and not isinstance(v["x"], bool) for v in values)
        x = (_q("x", name, scale={"type": "log"} if log else {"zero": False}) if numeric
             else {"field": "x", "type": "nominal", "title": name, "axis": {"labelAngle": 0}})
        parts.append({"title": {"text": f"{objective} vs {name}"}, "width": 160, "height": 190,
                      "data": {"values": values}, "mark": {"type": "point", "filled": True, "size": 50},
                      "encoding": {"x": x, "y": _q("value", objective, scale={"zero": False}),
                                   "color": {"field": "state", "type": "nominal", "title": None},
                                   "tooltip": [_q("trial", "trial", format="d"), {"field": "x", "title": name},
                                               _q("value", objective, format=".4f")]}})
    return _report(parts, "sweep")


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
