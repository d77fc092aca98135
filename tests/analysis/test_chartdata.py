"""The run's Vega-Lite panels and their rows: valid specs that every face draws, bounded keyed
rows from the one reducer, the headline's test labels, and a static image drawn by Vega."""

from __future__ import annotations

import math

import pytest

from lanenb.analysis import chartdata
from lanenb.analysis.runstate import RunState
from lanenb.charts import specs
from lanenb_trainer.events import Event


def _run(steps: int, ranks: int = 2, gpu: bool = False, timing: bool = False) -> RunState:
    s = RunState()
    for i in range(1, steps + 1):
        s.fold(Event("step", 0, float(i), data={"step": i, "epoch": 0, "total_steps": steps,
                                                "loss": 2.0 * math.exp(-i / 500), "lr": 0.01, "images_per_s": 50.0}))
        if i % 10 == 0:
            for r in range(ranks):
                d = {"cpu_percent": 90.0 + r, "rss_mb": 400.0}
                if gpu:
                    d.update(gpu_util=70.0, gpu_mem_mb=9000.0)
                s.fold(Event("system", r, float(i), data=d))
    if timing:
        for r in range(ranks):
            s.fold(Event("timing", r, 1.0, data={"steps": 10, "step_s": 0.2, "data_s": 0.05, "h2d_s": 0.0,
                                                 "compute_s": 0.1, "exchange_s": 0.05, "optimizer_s": 0.0,
                                                 "other_s": 0.0}))
    return s


@pytest.mark.parametrize("name", specs.PANELS)
def test_every_panel_is_valid_vega_lite_with_named_data_and_axis_titles(name):
    import vl_convert

    spec = specs.panel(name)
    vega = vl_convert.vegalite_to_vega(spec)  # raises on an invalid spec
    assert {d["name"] for d in vega["data"]} >= {d["name"] for d in specs.datasets(spec)}
    assert "values" not in str(spec)  # no data inside: the faces stream rows in
    assert spec["usermeta"]["lanenb"]["panel"] == name


def test_panel_names_are_checked():
    with pytest.raises(ValueError, match="chart panel 'nope': must be one of loss"):
        specs.panel("nope")


def test_rows_are_bounded_and_keyed_however_long_the_run():
    state = _run(20_000, ranks=4)
    rows = chartdata.run_rows(state)
    loss = [r for r in rows["loss"] if r["series"] == "loss"]
    assert chartdata.LIMIT // 2 <= len(loss) <= chartdata.LIMIT
    assert loss[0]["step"] == 1 and loss[-1]["step"] > 19_000  # the whole run, coarser
    assert all(r["lo"] <= r["value"] <= r["hi"] for r in loss)
    assert loss[0]["hi"] == pytest.approx(2.0 * math.exp(-1 / 500), rel=1e-5)  # the band keeps step 1
    for name, table in rows.items():
        keys = [r["k"] for r in table]
        assert len(keys) == len(set(keys)), name
    per_rank = [r for r in rows["cpu"] if r["rank"] == "rank 3"]
    assert 0 < len(per_rank) <= chartdata.LIMIT // 2


def test_a_filling_bucket_keeps_its_key_and_new_steps_add_rows():
    state = _run(10)
    before = {r["k"]: r for r in chartdata.run_rows(state)["loss"]}
    state.fold(Event("step", 0, 11.0, data={"step": 11, "loss": 0.5, "lr": 0.01}))
    after = {r["k"]: r for r in chartdata.run_rows(state)["loss"]}
    assert set(after) - set(before) == {"loss:11", "LR:11"}  # two new rows, the rest unchanged
    assert all(after[k] == v for k, v in before.items())


def test_gpu_runs_get_gpu_panels_and_timing_adds_the_step_split():
    assert [s["usermeta"]["lanenb"]["panel"] for s in chartdata.run_specs(_run(20))] == \
        ["loss", "validation", "throughput", "cpu", "rss"]
    panels = [s["usermeta"]["lanenb"]["panel"] for s in chartdata.run_specs(_run(20, gpu=True, timing=True))]
    assert panels == ["loss", "validation", "throughput", "gpu_util", "gpu_mem", "breakdown"]
    rows = chartdata.run_rows(_run(20, gpu=True, timing=True))
    assert "cpu" not in rows and {r["rank"] for r in rows["gpu_util"]} == {"rank 0", "rank 1"}
    assert {(r["rank"], r["part"]): r["share"] for r in rows["breakdown"]}[("rank 0", "compute")] == 0.5


def test_test_rows_carry_the_headline_and_the_other_model_with_their_labels():
    state = _run(5)
    state.fold(Event("eval", 0, 1.0, data={"split": "test", "model": "best", "epoch": 6, "accuracy": 0.938}))
    state.fold(Event("eval", 0, 1.0, data={"split": "test", "model": "last", "epoch": 10, "accuracy": 0.948}))
    labels = [r["label"] for r in chartdata.run_rows(state)["tests"]]
    assert labels == ["test 0.938 (best.pt, epoch 7)", "test 0.948 (last, epoch 10)"]  # counted from 1


def test_with_values_inlines_rows_and_the_static_image_is_drawn_by_vega():
    state = _run(100, timing=True)  # under the limit: every step is a row, loss and LR
    filled = specs.with_values(specs.panel("loss"), chartdata.run_rows(state))
    assert "name" not in filled["data"] and len(filled["data"]["values"]) == 200
    png = chartdata.run_png(chartdata.run_specs(state), chartdata.run_rows(state, chartdata.STATIC_LIMIT), "x")
    assert png.startswith(b"\x89PNG") and int.from_bytes(png[16:20], "big") > 1000


def test_the_static_renderer_names_a_bad_spec():
    with pytest.raises(ValueError, match="invalid Vega-Lite spec"):
        specs.to_png({"mark": "nonsense-mark", "data": {"values": []}})


def test_the_static_image_leaves_out_panels_without_rows():
    """Two steps and no system sample yet (a short cluster run): the image has the loss panels,
    not an empty per-rank panel (which Vega cannot lay out)."""
    state = RunState()
    for i in (1, 2):
        state.fold(Event("step", 0, float(i), data={"step": i, "loss": 1.5, "lr": 0.01, "images_per_s": 30.0}))
    rows = chartdata.run_rows(state, chartdata.STATIC_LIMIT)
    assert rows["cpu"] == [] and "cpu" in [s["usermeta"]["lanenb"]["panel"] for s in chartdata.run_specs(state)]
    png = chartdata.run_png(chartdata.run_specs(state), rows)
    assert png.startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="no chart has data yet"):
        chartdata.run_png(chartdata.run_specs(RunState()), chartdata.run_rows(RunState()))
