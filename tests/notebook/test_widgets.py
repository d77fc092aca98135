"""The live view and the panels as widgets: state from the events, a background thread that
keeps the caller free and stops at the end, a static fallback for headless runs, and every
panel control's bad input reported (Launch disabled) with its message."""

from __future__ import annotations

import base64
import html
import json
import threading
import time
from pathlib import Path

import pytest
from notebook_support import training_script
from polling import wait_for

from lanenb.jobs import JobState, TrainSpec, submit

PNG = b"\x89PNG\r\n\x1a\n"


def test_view_updates_from_its_thread_and_ends_with_the_final_state(scripted):
    from lanenb.notebook import JobView

    job = submit(TrainSpec(**scripted(training_script(steps=10, sleep=0.15, fail_rank=None))))
    view = JobView(job, refresh=0.2, chart_interval=0.2)
    assert view.running and threading.current_thread() is threading.main_thread()
    assert wait_for(lambda: 0 < view.progress.value < 1, 20)  # live, before the end
    assert wait_for(lambda: view.final, 30)
    assert not wait_for(lambda: view.running, 1.0)  # the thread stopped by itself at the end
    assert view.progress.value == 1.0 and view.progress.bar_style == "success"
    assert "succeeded" in view.title.value and "global batch 8" in view.title.value
    # the interactive charts: Vega-Lite panels and their rows, one loss row per step
    panels = [spec["usermeta"]["lanenb"]["panel"] for spec in view.charts.specs]
    assert panels == ["loss", "validation", "throughput", "cpu", "rss"]
    assert [r["step"] for r in view.charts.rows["loss"] if r["series"] == "loss"] == list(range(1, 11))
    assert {r["rank"] for r in view.charts.rows["cpu"]} == {"rank 0", "rank 1"}
    assert "<td style='padding:0 8px'>1</td><td style='padding:0 8px'>51</td>" in view.ranks.value
    assert "[1] plain output of rank 1" in view.log_pane.value
    view.rank_filter.value = 0
    assert "[1] plain output" not in view.log_pane.value and "[0] plain output" in view.log_pane.value
    bundle = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    assert "succeeded | step 10/10" in bundle["text/plain"] and "test acc 0.9100" in bundle["text/plain"]
    refreshes = view.refreshes
    time.sleep(0.6)
    assert view.refreshes == refreshes  # paused for good once final


def png_width(data: bytes) -> int:
    return int.from_bytes(bytes(data)[16:20], "big")  # the IHDR chunk's width


def test_view_names_the_bottleneck_live_and_draws_where_each_rank_s_step_goes(scripted):
    """Rank 1 computes twice as long; rank 0 waits for it in the all-reduce: the view says so
    while the run goes, the rank table splits each step, the charts gain the per-rank bars,
    and a headless run keeps the verdict in its text and image."""
    from lanenb.notebook import JobView

    timing = {0: {"compute_s": 0.2, "exchange_s": 0.2}, 1: {"compute_s": 0.4, "exchange_s": 0.0}}
    job = submit(TrainSpec(**scripted(training_script(steps=40, sleep=0.1, timing=timing), "straggle")))
    view = JobView(job, refresh=0.2, chart_interval=0.2)
    assert wait_for(lambda: "straggler" in view.verdict.value and not view.final, 20)
    assert "rank 1 is a straggler: its steps take 2.0x the others&#x27;" in view.verdict.value
    assert "(host node-1)" in view.verdict.value
    assert wait_for(lambda: view.final, 30)
    assert "<th>exchange</th>" in view.ranks.value and "<td style='padding:0 8px'>50%</td>" in view.ranks.value
    panels = [spec["usermeta"]["lanenb"]["panel"] for spec in view.charts.specs]
    assert panels[-1] == "breakdown"  # where each rank's step goes, beside the charts
    shares = {(r["rank_no"], r["part"]): r["share"] for r in view.charts.rows["breakdown"]}
    assert shares[(0, "exchange")] == pytest.approx(0.5, abs=0.01)
    assert shares[(1, "compute")] == pytest.approx(1.0, abs=0.01)
    assert png_width(view.static_png()) > 1000  # the headless image: the whole grid, 3 panels wide
    text = view._repr_mimebundle_()["text/plain"]
    assert "straggler: rank 1 is a straggler" in text
    job_without = submit(TrainSpec(**scripted(training_script(steps=4, sleep=0.01), "plain")))
    quiet = JobView(job_without, refresh=0.2)
    assert wait_for(lambda: quiet.final, 30)
    assert quiet.verdict.value == "" and "unknown" not in quiet._repr_mimebundle_()["text/plain"]


def test_view_shows_the_first_error_and_stop_cancels(scripted):
    from lanenb.notebook import JobView

    job = submit(TrainSpec(**scripted(training_script(steps=2, sleep=0.05, fail_rank=1), "fail")))
    view = JobView(job, refresh=0.2)
    assert wait_for(lambda: view.final, 30)
    assert "rank 1 failed: RuntimeError: loss is NaN" in view.banner.value
    assert "color:var(--lanenb-error" in view.log_pane.value and view.progress.bar_style == "danger"
    # the end says how it ended ("done" is for a success), and the Stop left has nothing to stop: grey
    assert view.eta.value == "failed" and view.stop_button.disabled and view.stop_button.button_style == ""
    view.errors_only.value = True
    assert "plain output" not in view.log_pane.value and "loss is NaN" in view.log_pane.value

    job = submit(TrainSpec(**scripted(training_script(steps=500, sleep=0.2), "long")))
    view = JobView(job, refresh=0.2)
    assert wait_for(lambda: view.state.step > 0, 20)
    view.stop_button.click()
    assert wait_for(lambda: view.final, 30)
    assert job.status().state == JobState.CANCELLED and "cancelled" in view.title.value
    assert view.eta.value == "cancelled" and view.stop_button.button_style == ""


def test_closing_the_view_stops_its_thread_and_a_second_view_continues(scripted):
    from lanenb.notebook import JobView

    job = submit(TrainSpec(**scripted(training_script(steps=400, sleep=0.1), "close")))
    first = JobView(job, refresh=0.2)
    assert wait_for(lambda: first.state.step >= 2, 20)
    second = JobView(job, refresh=0.2)  # re-attach: starts from the first view's cursor
    assert second.state.step >= 2 and second.cursor is not None  # not re-read from byte 0
    first.close()
    assert wait_for(lambda: not first.running, 5)
    steps_then = second.state.step
    assert wait_for(lambda: second.state.step > steps_then, 20)  # the other view lives on
    second.close()
    job.cancel()


def test_view_rejects_what_is_not_a_job():
    from lanenb.contract.spec import SpecError
    from lanenb.notebook import JobView

    with pytest.raises(SpecError, match="job='lane-x': must be a lanenb Job"):
        JobView("lane-x")


# ---------------------------------------------------------------------------- panel
@pytest.fixture
def synth(tmp_path):
    from lanenb_trainer.data.synth import synthesize

    root = tmp_path / "synth"
    synthesize(root, 12, seed=0, width=320, height=180, test_fraction=0.25, progress=False)
    return root


def test_panel_offers_found_datasets_and_bounds_ranks_by_this_machine(synth):
    import os

    from lanenb.notebook import TrainPanel

    panel = TrainPanel()
    assert str(synth.resolve()) in panel.dataset.options
    assert panel.processes.max == len(os.sched_getaffinity(0)) and panel.gpus.max == 0 and panel.gpus.disabled
    panel.dataset.value = str(synth)
    assert panel.problems == [] and not panel.launch.disabled and "ready to launch" in panel.message.value
    panel.batch_size.value = 5
    assert panel.global_batch.value == f"global batch {5 * panel.processes.value}"


PANEL_BAD = [
    ("dataset", "", "dataset='': must be a non-empty path"),
    ("dataset", "/no/such/data", "--data '/no/such/data': no such directory"),
    ("batch_size", 0, "batch_size=0: must be >= 1"),
    ("epochs", -2, "epochs=-2: must be >= 1"),
    ("extra", "--img-height 13", "--img-height must be a multiple of 8 and >= 32"),
    ("extra", "--bogus", "unrecognized arguments: --bogus"),
    ("extra", "--lr 'unclosed", "trainer flags \"--lr 'unclosed\": No closing quotation"),
]


@pytest.mark.parametrize("control,value,message", PANEL_BAD, ids=[f"{c}={v}" for c, v, _ in PANEL_BAD])
def test_panel_bad_choice_disables_launch_and_says_why(synth, control, value, message):
    from lanenb.notebook import TrainPanel

    panel = TrainPanel(dataset=str(synth))
    assert not panel.launch.disabled
    getattr(panel, control).value = value
    assert panel.launch.disabled and message in html.unescape(panel.message.value)
    panel._on_launch()  # a click while disabled (e.g. a stale frontend) starts nothing
    assert panel.job is None


def test_panel_kubernetes_choices_come_from_the_cluster(cluster, kubeconfig, monkeypatch):
    from kubernetes import client as k8s_client

    from lanenb.notebook import TrainPanel

    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    _thread, _fake = cluster
    from lanenb.contract.backends import get_backend

    api = get_backend("kubernetes").clients().api
    k8s_client.CoreV1Api(api).create_namespaced_persistent_volume_claim("default", {
        "metadata": {"name": "tusimple-data"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})
    panel = TrainPanel(backend="kubernetes")
    assert panel.capacity == {"processes": 3, "gpus": 3, "gpus_per_process": 1}
    assert panel.processes.max == 3 and panel.gpus.max == 1
    assert panel.dataset.options == ("tusimple-data",)
    panel.dataset.value = "tusimple-data"
    assert "image=None: the kubernetes backend needs a container image" in panel.message.value
    panel.subpath.value = "tusimple"
    panel.image.value = "registry.example.com/lanenb-trainer:0.1"
    assert panel.problems == [], panel.problems
    fields = panel.spec_fields()
    assert fields["volumes"] == ["tusimple-data:/mnt/data"] and fields["dataset"] == "/mnt/data/tusimple"
    panel.subpath.value = "../../etc"
    assert panel.launch.disabled
    assert "path in PVC '../../etc': must be a folder inside the PVC" in html.unescape(panel.message.value)
    panel.subpath.value = "tusimple"
    panel.namespace.value = "Bad_NS"
    assert panel.launch.disabled
    assert "namespace='Bad_NS': must be an RFC 1123 label" in html.unescape(panel.message.value)


def test_panel_choice_controls_accept_only_their_options(synth):
    import traitlets

    from lanenb.notebook import TrainPanel

    panel = TrainPanel(dataset=str(synth))
    for control, bad in ((panel.engine, "tensorflow"), (panel.backbone, "alexnet"), (panel.backend, "slurm")):
        with pytest.raises(traitlets.TraitError, match="Invalid selection"):
            control.value = bad
    panel.processes.value = 10_000  # a slider clamps to what this machine has
    assert panel.processes.value == panel.processes.max
    assert not panel.launch.disabled


def test_panel_launches_and_stops_a_real_job(synth, scripted):
    from lanenb.notebook import TrainPanel

    spec = scripted(training_script(steps=300, sleep=0.1), "panel")
    panel = TrainPanel(backend="scripted", dataset=spec["dataset"])
    assert not panel.launch.disabled, panel.problems
    panel.launch.click()
    assert panel.job is not None and panel.view is not None and panel.launch.disabled
    assert wait_for(lambda: panel.view.state.step > 0, 20)
    panel.stop.click()
    assert wait_for(lambda: panel.job.status().state == JobState.CANCELLED, 30)
    assert wait_for(lambda: not panel.launch.disabled, 10)  # ready for the next run


# ---------------------------------------------------------------------------- previews
def test_dataset_preview_shows_frames_sizes_histogram_and_problems(synth):
    from lanenb.notebook import DatasetPreview

    view = DatasetPreview(synth, n=4)
    assert bytes(view.grid.value).startswith(PNG) and bytes(view.histogram.value).startswith(PNG)
    assert view.sizes["train"] + view.sizes["val"] == 9 and view.sizes["test"] == 3
    assert sum(view.lane_counts.values()) == 12
    assert "data check: no problems" in view.problem_box.value
    first = view.grid.value
    view.other.click()
    assert view.grid.value != first
    # a broken label line is reported, as lanenb data check does
    label = synth / "label_data_synth.json"
    label.write_text(label.read_text() + '{"lanes": [[1, 2]], "h_samples": [1], "raw_file": "missing.jpg"}\n')
    broken = DatasetPreview(synth, n=2)
    assert "problem(s)" in broken.problem_box.value and "label_data_synth.json:10" in broken.problem_box.value
    assert "1 problem(s)" in broken._repr_mimebundle_()["text/plain"] or "problem(s)" in broken.static_text()


@pytest.mark.parametrize("kwargs,message", [
    (dict(path="/no/such"), "path='/no/such': no such directory"),
    (dict(n=0), "n=0: must be an integer from 1 to 64"),
    (dict(split="dev"), "split='dev': must be one of train, val, test"),
])
def test_dataset_preview_bad_input(synth, kwargs, message):
    from lanenb.notebook import DatasetPreview
    from lanenb.notebook.dataset import DatasetError

    args = {"path": synth, **kwargs}
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        DatasetPreview(**args)


def test_dataset_preview_needs_labels(tmp_path):
    from lanenb.notebook import DatasetPreview
    from lanenb.notebook.dataset import DatasetError

    with pytest.raises(DatasetError, match="no labelled frames"):
        DatasetPreview(tmp_path)


def _fake_run(tmp_path: Path, synth: Path) -> Path:
    """A run dir whose predictions are the ground truth with one frame's lanes dropped and one
    frame's lanes shifted: the evaluator must put exactly those two first."""
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"data": str(synth)}))
    gt = [json.loads(l) for l in (synth / "test_label.json").read_text().splitlines()]
    preds = []
    for i, rec in enumerate(gt):
        lanes = rec["lanes"]
        if i == 0:
            lanes = []
        elif i == 1:
            lanes = [[x + 60 if x >= 0 else x for x in lane] for lane in lanes]
        preds.append({"raw_file": rec["raw_file"], "lanes": lanes, "run_time": 10})
    (run / "predictions" / "test.json").write_text("".join(json.dumps(p) + "\n" for p in preds))
    return run, [g["raw_file"] for g in gt]


def test_prediction_viewer_lists_worst_frames_first_and_draws_them(tmp_path, synth):
    from lanenb.notebook import PredictionViewer

    run, files = _fake_run(tmp_path, synth)
    view = PredictionViewer(run)
    order = [v for _, v in view.frames.options]
    assert set(order[:2]) == {files[0], files[1]} and view.frames.value == order[0]
    assert bytes(view.image.value).startswith(PNG) and "accuracy 0.000" in view.detail.value
    view.sort.value = "best accuracy first"
    assert [v for _, v in view.frames.options][-2:] and view.frames.value not in (files[0], files[1])
    view.sort.value = "most false negatives first"
    assert view.frames.value == files[0]
    bundle = view._repr_mimebundle_()
    assert base64.b64decode(bundle["image/png"]).startswith(PNG)
    assert f"acc 0.000 FP 0.00 FN 1.00 {files[0]}" in bundle["text/plain"]


@pytest.mark.parametrize("setup,message", [
    ("missing_dir", "does not exist (on this machine)"),
    ("no_predictions", "test.json does not exist and the run has no checkpoint to predict with"),
    ("bad_sort", "sort='random': must be one of"),
    ("bad_rows", "rows=0: must be an integer >= 1"),
    ("not_a_job", "job_or_run_dir=42: must be a Job or a run directory"),
])
def test_prediction_viewer_bad_input(tmp_path, synth, setup, message):
    from lanenb.notebook import PredictionViewer
    from lanenb.notebook.predictions import PredictionError

    run, _ = _fake_run(tmp_path, synth)
    args, kwargs = [run], {}
    if setup == "missing_dir":
        args = [tmp_path / "nope"]
    elif setup == "no_predictions":
        (run / "predictions" / "test.json").unlink()
    elif setup == "bad_sort":
        kwargs = {"sort": "random"}
    elif setup == "bad_rows":
        kwargs = {"rows": 0}
    elif setup == "not_a_job":
        args = [42]
    with pytest.raises(PredictionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PredictionViewer(*args, **kwargs)
