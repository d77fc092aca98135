"""A run's chart rows, from the one reducer (``RunState``), for the Vega-Lite panels of
``lanenb.charts.specs``.

Every face draws the same rows: the notebook's ``LiveCharts`` widget, the sidebar (the server
sends them with the job's reduced state) and the static PNG of a headless run. Rows come from
the bounded ``BucketSeries`` (a bucket's mean with its min/max band), so a week-long run is a
few hundred rows per series, whatever its number of steps. Each row has a key ``k`` (series and
bucket start): a face replaces the rows whose key vanished or changed (the newest bucket fills
up; buckets merge as the run grows) and inserts the rest, instead of re-drawing a chart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lanenb.analysis.runstate import SETTINGS, RunState
from lanenb.analysis.series import BucketSeries
from lanenb.charts import specs
from lanenb_trainer.epochs import epoch_number

__all__ = ["run_rows", "run_specs", "rank_table", "run_png", "resume_rows", "Rows", "LIMIT", "STATIC_LIMIT"]

Rows = dict[str, list[dict[str, Any]]]

_VAL = (("val_accuracy", "accuracy"), ("val_fp", "FP"), ("val_fn", "FN"))
# points per series a live chart holds (half that per rank for system samples: several ranks
# share a panel): two points per 4 px of a 340 px panel, the min/max band keeps the spikes.
# Measured in Chromium (bench/notebook_view.py --browser): Vega's update of a panel with its
# hover layer takes ~20 ms at 160 points and 40-90 ms at 300
LIMIT = 160
STATIC_LIMIT = 200  # the static image
_SYSTEM = {"gpu_util": "gpu_util", "gpu_mem": "gpu_mem_mb", "cpu": "cpu_percent", "rss": "rss_mb"}


def _num(v: float) -> float:
    return round(v, 6) if abs(v) >= 1e-3 else float(f"{v:.6g}")


def _bucket_rows(samples: BucketSeries, key: str, x_name: str, limit: int, **fields: Any) -> list[dict[str, Any]]:
    samples = samples.coarsened(limit)
    band = samples.width > 1
    rows = []
    for x, y, lo, hi in zip(samples.x, samples.y, samples.ymin, samples.ymax):
        row = {"k": f"{key}:{x:g}", x_name: x, "value": _num(y), **fields}
        if band:
            row["lo"], row["hi"] = _num(lo), _num(hi)
        else:
            row["lo"] = row["hi"] = row["value"]
        rows.append(row)
    return rows


def resume_rows(state: RunState) -> list[dict[str, Any]]:
    """One row per resume (``RunState.resume_marks``) for the dashed rules of the loss,
    validation and throughput panels (dataset ``resumes``): ``step`` (the checkpoint the run
    continued from), ``epoch`` (the same point on the validation panel's axis, where epoch ``n``'s
    point sits at its end), ``kind`` (``resize`` or ``resume``) and the tooltip's ``label``:
    ``resumed: 3 steps lost; resized 2 -> 1 ranks; loader workers 2 -> 6``."""
    rows = []
    for mark in state.resume_marks:
        step, per_epoch, epoch = mark["step"], mark.get("steps_per_epoch"), mark.get("epoch")
        at = float(epoch) if isinstance(epoch, int) else 0.0
        if isinstance(per_epoch, int) and per_epoch > 0:  # mid-epoch: between its start and end
            at = min(max(step / per_epoch, at), at + 1.0)
        lost = mark["steps_lost"]
        words = [f"resumed: {lost} step{'s' if lost != 1 else ''} lost"]
        resized = mark.get("resized")
        if resized:
            words.append(f"resized {resized.get('from')} -> {resized.get('to')} ranks")
        words += [f"{SETTINGS.get(c['setting'], c['setting'])} {c['from']} -> {c['to']}" for c in mark["changes"]]
        rows.append({"k": f"resume:{mark.get('count')}:{step}", "step": step, "epoch": _num(at),
                     "kind": "resize" if resized else "resume", "label": "; ".join(words)})
    return rows


def _gpu(state: RunState) -> bool:
    return any("gpu_util" in table for table in state.system.values())


def run_rows(state: RunState, limit: int = LIMIT) -> Rows:
    """The rows of every run panel (datasets ``loss``, ``validation``, ``tests``,
    ``throughput``, ``gpu_util``/``gpu_mem`` or ``cpu``/``rss``, ``breakdown``, and ``resumes``:
    the rules the loss, validation and throughput panels draw where the run resumed).

    Args:
        state: the run.
        limit: the most points per series (per rank for system samples); buckets are merged
            pairwise down to it, their min/max kept as the band.
    """
    rows: Rows = {}
    loss: list[dict[str, Any]] = []
    if "loss" in state.series:
        loss += _bucket_rows(state.series["loss"], "loss", "step", limit, series="loss")
    if "lr" in state.series:
        loss += [{k: v for k, v in r.items() if k not in ("lo", "hi")}
                 for r in _bucket_rows(state.series["lr"], "LR", "step", limit, series="LR")]
    rows["loss"] = loss
    rows["throughput"] = (_bucket_rows(state.series["images_per_s"], "tput", "step", limit)
                          if "images_per_s" in state.series else [])
    validation = []
    for name, label in _VAL:
        s = state.epochs_hist.get(name)
        if s is not None:  # epochs count from 0 in the events; people say "epoch 1" for the first
            validation += [{"k": f"{label}:{x:g}", "epoch": epoch_number(int(x)), "metric": label, "value": _num(y)}
                           for x, y in zip(s.x, s.y)]
    rows["validation"] = validation
    tests: list[dict[str, Any]] = []
    headline = state.headline()
    if headline is not None and headline.split == "test":
        for scored in (headline.primary, headline.other):
            if scored is not None and scored.accuracy is not None:
                tests.append({"k": f"test:{scored.label}", "accuracy": _num(scored.accuracy), "slot": len(tests),
                              "label": f"test {scored.accuracy:.3f} ({scored.label})"})
    rows["tests"] = tests
    gpu = _gpu(state)
    ranks = sorted(state.system)
    starts = [t[f].x[0] for t in state.system.values() for f in t if len(t[f])]
    t0 = min(starts, default=0.0)
    for panel, field in _SYSTEM.items():
        if panel.startswith("gpu") != gpu:
            continue
        out = []
        for r in ranks:
            s = state.system[r].get(field)
            if s is not None:
                s = s.coarsened(max(2, limit // 2))
                out += [{"k": f"{r}:{x:.3f}", "t": round(x - t0, 3), "rank": f"rank {r}", "value": _num(y)}
                        for x, y in zip(s.x, s.y)]
        rows[panel] = out
    breakdown = []
    hosts = state.hosts
    multi = len(set(hosts.values())) > 1
    for r, split in sorted(state.breakdown().items()):
        label = f"rank {r}" + (f" ({hosts[r]})" if multi and hosts.get(r) else "")
        for order, part in enumerate(specs.STEP_COLOURS):
            breakdown.append({"k": f"{r}:{part}", "rank": label, "rank_no": r, "part": part, "order": order,
                              "share": _num(float(split.get(part, 0.0))), "step_s": _num(float(split["step_s"]))})
    rows["breakdown"] = breakdown
    rows[specs.RESUMES] = resume_rows(state)
    return rows


def rank_table(state: RunState) -> list[dict[str, Any]]:
    """One row per rank for the per-rank tables (live view, sidebar panel): host, the latest
    GPU utilisation and memory or CPU and RSS, and where its step goes (``breakdown``)."""
    last, split, hosts = state.system_last, state.breakdown(), state.hosts
    out = []
    for rank in sorted(set(last) | set(split)):
        v = last.get(rank, {})
        row: dict[str, Any] = {"rank": rank, "host": hosts.get(rank)}
        row.update({k: v.get(k) for k in ("gpu_util", "gpu_mem_mb", "gpu_mem_total_mb", "cpu_percent", "rss_mb")})
        b = split.get(rank)
        row.update({k: (b or {}).get(k) for k in ("step_s", "data", "compute", "exchange", "other")})
        out.append(row)
    return out


def run_specs(state: RunState) -> list[dict[str, Any]]:
    """The panel specs this run needs now (GPU or CPU panels; the step split once timed)."""
    return [specs.panel(n) for n in specs.run_panels(_gpu(state), bool(state.breakdown()))]


def run_png(panels: list[dict[str, Any]], rows: Mapping[str, list[dict[str, Any]]], title: str = "") -> bytes:
    """The whole view as one PNG drawn from the same specs (headless notebooks, reports).

    Args:
        panels: ``run_specs(state)``.
        rows: ``run_rows(state, STATIC_LIMIT)``.
        title: written above the grid.

    Raises:
        ValueError: no panel has rows yet.
        RuntimeError: the renderer failed (``lanenb.charts.specs.to_png``).
    """
    # panels with no rows yet are left out: there is nothing to see, and Vega cannot lay out an
    # empty per-rank panel (its hover layer has no points: "SVG has an invalid size")
    # (the resume rules alone are no data: they mark a curve)
    filled = [specs.with_values(spec, rows) for spec in panels
              if any(rows.get(data["name"]) for data in specs.datasets(spec) if data["name"] != specs.RESUMES)]
    if not filled:
        raise ValueError("no chart has data yet")
    return specs.to_png(specs.concat(filled, columns=3, title=title or None))
