"""Damage seen from the views: a half-written metrics.json, a run dir deleted under a live view,
a finished job whose log is out of reach."""

from __future__ import annotations

import json
import shutil
import warnings

import pytest
from load_jobs import record_job

from lanenb.analysis.runstate import tail_state
from lanenb.jobs import get_job
from lanenb.registry.jobs import JobRegistry


def test_a_half_written_metrics_json_is_named_ignored_and_read_again_once_repaired(lanenb_home):
    record_job(lanenb_home, "j", state="succeeded", running_here=False)
    metrics = lanenb_home / "runs" / "j" / "metrics.json"
    metrics.write_text('{"test": {"accuracy": 0.9')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert get_job("j").metrics is None
    message = str(caught[0].message)
    assert str(metrics) in message and "not valid JSON" in message and "log events" in message
    assert JobRegistry().get("j").metrics is None  # nothing recorded from the broken file
    metrics.write_text(json.dumps({"test": {"accuracy": 0.93, "fp": 0.1, "fn": 0.1, "frames": 10}}))
    assert get_job("j").metrics["test"]["accuracy"] == 0.93


def test_a_live_view_of_a_job_whose_run_dir_is_deleted_says_so_and_stops(lanenb_home):
    pytest.importorskip("ipywidgets")
    from lanenb.notebook.view import JobView

    record_job(lanenb_home, "live")
    (lanenb_home / "runs" / "live" / "job.log").write_text("[1,0]<stdout>:hello\n")
    view = JobView(get_job("live"), refresh=0.1, start=False)
    assert view.update() is False
    shutil.rmtree(lanenb_home / "runs" / "live")
    view.start()
    view._thread.join(5)
    assert not view.running and "was deleted" in view.last_error
    assert "stopped following" in view.banner.value and view.stop_button.disabled
    view.close()


def test_a_finished_job_whose_log_cannot_be_read_keeps_its_recorded_row(lanenb_home, monkeypatch):
    record_job(lanenb_home, "done", state="succeeded", running_here=False)
    JobRegistry().update("done", metrics={"test": {"accuracy": 0.91, "fp": 0.1, "fn": 0.1, "frames": 5}})
    job = get_job("done")

    def unreachable(*args, **kwargs):
        raise ConnectionError("the cluster is gone")

    monkeypatch.setattr(type(job.backend), "read_log", unreachable)
    state = tail_state(job)
    assert state.state == "succeeded" and state.test["accuracy"] == 0.91
    record_job(lanenb_home, "live")  # a running one whose log cannot be read is an error, not a guess
    with pytest.raises(ConnectionError):
        tail_state(get_job("live"))
