"""%lanescale / lanenb.analysis.scaling and %lanecompare / lanenb.analysis.compare: every figure comes from the runs'
events. The scripted ranks report chosen step times, throughput and utilisation per world size;
editing those events changes the report exactly."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.display import display
from IPython.utils.capture import capture_output
from notebook_support import training_script

from lanenb.charts.specs import REPORT_MIME
from lanenb.jobs import SpecError, TrainSpec, get_job, list_jobs, submit


def scaling_script(ips: dict[int, float], step_time: dict[int, float], util: dict[int, float],
                   steps: int = 8, timing: dict[int, dict[str, float]] | None = None) -> list[dict]:
    """The events of a scaling run per world size; with ``timing``, every rank also reports a
    timing window every 2 steps with those per-step seconds (``data_s``, ``compute_s``,
    ``exchange_s``; the windows up to step 4 are start-up: all data wait)."""
    out = []
    for world, rate in ips.items():
        for r in range(world):
            out.append({"world": world, "rank": r, "event": {
                "kind": "start", "world_size": world, "engine": "ddp", "device": "cpu", "total_steps": 1000,
                "steps_per_epoch": 100, "train_frames": 3600, "config": {"batch_size": 4, "epochs": 1000}}})
        for s in range(1, steps + 1):
            warm = s <= 3  # warm-up steps are slow and must not count
            out.append({"world": world, "rank": 0, "event": {
                "kind": "step", "epoch": 0, "step": s, "total_steps": 1000, "loss": 1.0 / s, "lr": 0.01,
                "images_per_s": rate / 10 if warm else rate, "step_time_s": step_time[world] * (10 if warm else 1)}})
            for r in range(world):
                out.append({"world": world, "rank": r, "event": {"kind": "system", "cpu_percent": util[world] + r,
                                                                "rss_mb": 300.0}})
            if timing and s % 2 == 0:
                parts = timing[world] if s > 4 else {"data_s": 0.9, "compute_s": 0.1}
                for r in range(world):
                    out.append({"world": world, "rank": r, "event": {
                        "kind": "timing", "step": s, "steps": 2, "host": "node-a", "device": "cpu",
                        "step_s": sum(parts.values()), "h2d_s": 0.0, "optimizer_s": 0.0, "other_s": 0.0,
                        "data_s": 0.0, "exchange_s": 0.0, "compute_s": 0.0, "pause_s": 0.0, "pause": [], **parts}})
        for r in range(world):
            out.append({"world": world, "rank": r, "event": {"kind": "end", "status": "stopped", "step": steps,
                                                              "duration_s": 2.0}})
    return out


def test_measure_reports_the_figures_the_events_carry(scripted, lanenb_home):
    from lanenb.analysis.scaling import load, measure

    spec = scripted(scaling_script({1: 100.0, 2: 180.0, 4: 300.0}, {1: 0.04, 2: 0.0444, 4: 0.0533},
                                   {1: 95.0, 2: 90.0, 4: 70.0}), "scale")
    report = measure(TrainSpec(**spec), [4, 1, 2], steps=8, warmup=3, epochs=10, name="scale-test",
                     progress=False)
    rows = report.rows()
    assert [r["processes"] for r in rows] == [1, 2, 4]
    assert [r["images_per_s"] for r in rows] == [100.0, 180.0, 300.0]  # warm-up steps dropped
    assert [round(r["speedup"], 3) for r in rows] == [1.0, 1.8, 3.0]
    assert [round(r["efficiency"], 3) for r in rows] == [1.0, 0.9, 0.75]
    assert round(rows[1]["exchange_share"], 2) == round(1 - 0.04 / 0.0444, 2)
    assert rows[2]["utilisation"] == {0: 70.0, 1: 71.0, 2: 72.0, 3: 73.0} and rows[0]["util_kind"] == "cpu"
    assert rows[0]["projected_s"] == pytest.approx(3600 * 10 / 100.0)  # frames x epochs / images/s
    assert rows[2]["projected_s"] == pytest.approx(3600 * 10 / 300.0)
    text = repr(report)
    assert "3.00x" in text and "75%" in text and "6m 0s" in text and "2m 0s" in text
    assert report.png().startswith(b"\x89PNG")
    # recorded with the runs, and loadable in a new kernel
    saved = json.loads((lanenb_home / "scaling" / "scale-test.json").read_text())
    assert [p["job"] for p in saved["points"]] == ["scale-test-n1", "scale-test-n2", "scale-test-n4"]
    assert load("scale-test").rows()[1]["speedup"] == pytest.approx(1.8)
    run_dir = get_job("scale-test-n2").run_dir
    assert json.loads(Path(run_dir, "scaling.json").read_text())["rows"][1]["images_per_s"] == 180.0
    assert get_job("scale-test-n4").spec.max_steps == 8 and get_job("scale-test-n4").spec.processes == 4


def test_edited_events_give_edited_figures(scripted):
    from lanenb.analysis.scaling import from_jobs, measure

    spec = scripted(scaling_script({1: 50.0, 2: 100.0}, {1: 0.1, 2: 0.1}, {1: 99.0, 2: 99.0}), "ideal")
    report = measure(TrainSpec(**spec), [1, 2], steps=6, warmup=3, name="ideal", progress=False)
    assert report.rows()[1]["efficiency"] == pytest.approx(1.0) and report.rows()[1]["exchange_share"] == 0.0
    # rewrite the 2-rank run's log as if its steps had been twice as slow: the rebuilt report follows
    log = get_job("ideal-n2").handle["log"]
    text = Path(log).read_text().replace('"images_per_s":100.0', '"images_per_s":50.0')
    Path(log).write_text(text.replace('"step_time_s":0.1', '"step_time_s":0.2'))
    rebuilt = from_jobs(["ideal-n1", "ideal-n2"], warmup=3)
    assert rebuilt.rows()[1]["speedup"] == pytest.approx(1.0) and rebuilt.rows()[1]["efficiency"] == pytest.approx(0.5)
    assert rebuilt.rows()[1]["exchange_share"] == pytest.approx(0.5)


def test_the_report_shows_how_each_rank_count_splits_its_step_and_what_stopped_it(scripted, lanenb_home):
    """"Was 2 ranks worth it" comes with "what stopped them": the step split per rank count
    (timing windows after the warm-up only) and the doctor's verdict for each."""
    from lanenb.analysis.scaling import ScalingReport, load, measure

    split = {1: {"data_s": 0.01, "compute_s": 0.09, "exchange_s": 0.0},
             2: {"data_s": 0.01, "compute_s": 0.09, "exchange_s": 0.1}}
    spec = scripted(scaling_script({1: 100.0, 2: 110.0}, {1: 0.1, 2: 0.2}, {1: 95.0, 2: 90.0}, timing=split), "split")
    report = measure(TrainSpec(**spec), [1, 2], steps=8, warmup=3, name="split", progress=False)
    one, two = report.rows()
    assert one["breakdown"] == pytest.approx({"data": 0.1, "compute": 0.9, "exchange": 0.0, "other": 0.0})
    assert two["breakdown"] == pytest.approx({"data": 0.05, "compute": 0.45, "exchange": 0.5, "other": 0.0})
    assert one["verdict"]["line"].startswith("healthy: compute 90%") and one["verdict"]["severity"] == "ok"
    assert two["verdict"]["kind"] == "exchange-bound"
    assert two["verdict"]["line"].startswith("exchange-bound: 50% of each step is gradient exchange; larger per-rank")
    text = repr(report)
    assert "10/90/0/0%" in text and "5/45/50/0%" in text
    assert "2 ranks: exchange-bound: 50% of each step" in text and "exchange-bound" in report.table().html()
    assert report.png().startswith(b"\x89PNG")
    table, chart = displayed(report)
    assert "speed-up" in table["text/html"] and "<img" not in table["text/html"]
    speed, _throughput, split = chart[REPORT_MIME]["hconcat"]
    assert [(p["ranks"], round(p["measured"], 3)) for p in speed["data"]["values"]] == [(1, 1.0), (2, round(
        two["speedup"], 3))]
    assert {(r["ranks"], r["part"]): round(r["share"], 2) for r in split["data"]["values"]}[(2, "exchange")] == 0.5
    assert chart["image/png"] and chart["text/plain"].startswith("<chart: weak scaling")
    assert load("split").rows()[1]["verdict"] == two["verdict"]
    # a report saved before the doctor existed loads and shows "-" for what it lacks
    old = report.to_dict()
    for point in old["points"]:
        del point["breakdown"], point["verdict"]
    before = ScalingReport.from_dict(old)
    assert before.rows()[1]["breakdown"] is None and before.rows()[1]["verdict"] is None
    last_row = before.table().text().splitlines()[-1]
    assert last_row.split()[-2:] == ["-", "-"]
    assert before.png().startswith(b"\x89PNG")


def displayed(report) -> list[dict]:
    """What a notebook shows for a report (``%load_ext lanenb`` registered the display), as MIME bundles."""
    with capture_output() as cap:
        display(report)
    return [o.data for o in cap.outputs]


def test_a_chart_the_renderer_refuses_leaves_the_table_and_says_why():
    from lanenb.analysis.charted import ChartedReport
    from lanenb.tables import Table

    class Refused(ChartedReport):
        def chart(self):
            return {"mark": 12}  # vl-convert itself refuses it

        def table(self):
            png, why = self.png_or_reason()
            return Table(["a"], [["1"]], title="t", note=why or "", png=png, chart=self.chart_output())

    first, second = displayed(Refused())
    assert "no static chart image: " in first["text/html"] and "image/png" not in second
    assert second[REPORT_MIME] == {"mark": 12}


@pytest.mark.parametrize("kwargs,message", [
    (dict(processes=[]), "processes=[]: must be a list of rank counts >= 1"),
    (dict(processes=[1, 0]), "processes=[1, 0]: must be a list of rank counts >= 1"),
    (dict(processes=[2, 2]), "processes=[2, 2]: lists a rank count twice"),
    (dict(steps=1), "steps=1: must be an integer >= 2"),
    (dict(steps=10, warmup=10), "warmup=10: must be an integer from 0 to steps-1 (9)"),
    (dict(mode="diagonal"), "mode='diagonal': must be weak or strong"),
    (dict(mode="strong", processes=[1, 3]), "batch_size=8: strong scaling splits the global batch over [1, 3]"),
])
def test_measure_bad_input(tmp_path, kwargs, message):
    from lanenb.analysis.scaling import measure
    from lanenb.contract.spec import SpecError

    with pytest.raises(SpecError) as info:
        measure(TrainSpec(dataset=str(tmp_path)), **{"processes": [1, 2], **kwargs}, progress=False)
    assert message in str(info.value)


def test_a_run_without_steps_after_warmup_is_named(scripted):
    from lanenb.analysis.scaling import ScalingError, measure

    spec = scripted(scaling_script({1: 10.0}, {1: 0.1}, {1: 50.0}, steps=3), "short")
    with pytest.raises(ScalingError, match="run 'short-n1' \\(1 ranks\\) reported no step after the 5 warm-up"):
        measure(TrainSpec(**spec), [1], steps=6, warmup=5, name="short", progress=False)


def test_lanescale_magic_and_its_bad_input(ip, scripted, capsys):
    spec = scripted(scaling_script({1: 100.0, 2: 150.0}, {1: 0.04, 2: 0.053}, {1: 90.0, 2: 80.0}), "magic")
    report = ip.run_line_magic("lanescale", f"--backend scripted --data {spec['dataset']} --processes 1,2 "
                                            f"--steps 8 --warmup 3 --name magic-scale --epochs 4")
    assert [round(r["speedup"], 2) for r in report.rows()] == [1.0, 1.5]
    assert report.epochs == 4
    for line, message in [
        ("--data x --processes 1,two", "argument --processes/-np: '1,two' is not a comma-separated list"),
        (f"--data {spec['dataset']} --processes 1,2 --steps 1", "steps=1: must be an integer >= 2"),
        (f"--data {spec['dataset']} --mode diagonal", "argument --mode: invalid choice: 'diagonal'"),
    ]:
        with pytest.raises(UsageError) as info:
            ip.run_line_magic("lanescale", line)
        assert message in str(info.value)


def test_compare_tables_differences_metrics_and_curves(ip, scripted):
    from lanenb.analysis.compare import CompareError, compare

    a = submit(TrainSpec(**{**scripted(training_script(steps=4, sleep=0.0), "a"), "name": "run-a", "batch_size": 4}))
    a.wait(60)
    b = submit(TrainSpec(**{**scripted(training_script(steps=4, sleep=0.0, scale=0.5), "b"), "name": "run-b",
                            "batch_size": 8, "epochs": 3}))
    b.wait(60)
    cmp = compare(["run-a", "run-b"])
    assert cmp.differences == ["batch_size", "epochs"]
    rows = {r["run"]: r for r in cmp.rows}
    assert rows["run-a"]["test_accuracy"] == pytest.approx(0.91)
    assert rows["run-b"]["test_accuracy"] == pytest.approx(0.455)
    assert rows["run-a"]["images_per_s"] == 100.0 and rows["run-b"]["images_per_s"] == 50.0
    assert rows["run-a"]["duration_s"] == 1.0
    html = cmp.table().html()
    assert "background:#fff3cd" in html and "batch_size" in html and "<img src='data:image/png;base64," in html
    text = repr(cmp)
    assert "highlighted: settings that differ (batch_size, epochs)" in text and "0.9100" in text
    out = ip.run_line_magic("lanecompare", "run-a run-b")
    assert out.differences == ["batch_size", "epochs"]
    # shown: the table, then the chart as an output of its own (Vega-Lite for JupyterLab + its PNG)
    table, chart = displayed(out)
    assert "batch_size" in table["text/html"] and "<img" not in table["text/html"]
    spec = chart[REPORT_MIME]
    loss, _acc = spec["hconcat"]
    assert {row["run"] for row in loss["data"]["values"]} == {"run-a", "run-b"}
    assert all(set(row) == {"run", "step", "loss"} for row in loss["data"]["values"])
    assert {"field": "run", "title": "run"} in loss["encoding"]["tooltip"]  # hover names the run
    assert base64.b64decode(chart["image/png"]).startswith(b"\x89PNG")
    with pytest.raises(CompareError, match="give two or more job names"):
        compare(["run-a"])
    with pytest.raises(CompareError, match="a run is named twice"):
        compare(["run-a", "run-a"])
    with pytest.raises(UsageError, match="no job named 'nope'"):
        ip.run_line_magic("lanecompare", "run-a nope")


def test_measure_refuses_a_size_this_machine_cannot_run_before_running_any(scripted, lanenb_home):
    import os

    from lanenb.analysis.scaling import measure

    spec = {**scripted(scaling_script({1: 100.0}, {1: 0.04}, {1: 95.0}), "scale"), "local": {}}
    too_many = len(os.sched_getaffinity(0)) + 1
    with pytest.raises(SpecError, match=rf"processes={too_many}: more ranks than this machine runs"):
        measure(TrainSpec(**spec), [1, too_many], steps=8, warmup=3, name="scale-refused", progress=False)
    assert list_jobs() == []  # not even the 1-rank run started
