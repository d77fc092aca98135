"""The one job-summary row (``lanenb.analysis.summary``) and how ``%lanejobs`` formats it: the
rules (ETA only while running, the reason beside a final state, test accuracy before val, an
unreadable job as one "unknown" row) live in the summary, each face only words them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lanenb.analysis.runstate import RunState
from lanenb.analysis.summary import job_summaries, job_summary
from lanenb.contract.status import JobState, JobStatus
from lanenb.notebook.magics import JobTable
from lanenb_trainer.events import format_event, parse_line


@dataclass
class FakeJob:
    name: str = "lane-1"
    backend_name: str = "local"
    created: float | None = 1000.0
    run_dir: str | None = "/runs/lane-1"


def ev(kind: str, t: float = 0.0, rank: int = 0, **fields):
    e = parse_line(format_event(kind, rank, **fields))
    return type(e)(kind=e.kind, rank=e.rank, t=t, v=e.v, data=e.data)


def running_state() -> RunState:
    state = RunState()
    state.fold_status(JobStatus(JobState.RUNNING))
    state.fold(ev("start", config={"epochs": 2}, total_steps=100))
    for step, t in ((10, 100.0), (20, 110.0)):  # 1 step/s: 80 steps left
        state.fold(ev("step", t=t, step=step, total_steps=100, loss=0.5))
    state.fold(ev("epoch", epoch=0, val_accuracy=0.8, val_fp=0.1, val_fn=0.1))
    state.fold(ev("system", t=111.0, cpu_percent=40.0))
    state.fold(ev("system", t=112.0, cpu_percent=60.0, gpu_util=90.0))
    return state


def test_a_running_job_row_has_progress_eta_val_accuracy_and_age():
    row = job_summary(FakeJob(), running_state(), now=1125.0)
    assert row["status"] == "running" and row["progress"] == pytest.approx(0.2)
    assert row["eta_s"] == pytest.approx(80.0) and row["age_s"] == 125.0
    assert (row["accuracy"], row["accuracy_split"]) == (0.8, "val") and row["final"] is False
    assert row["utilisation"]["metric"] == "gpu_util" and row["utilisation"]["values"] == [90.0]
    assert JobTable._row(row) == {"name": "lane-1", "backend": "local", "status": "running",
                                  "progress": "20% (ETA 1m 20s)", "accuracy": "0.8000 val (epoch 1)", "age": "2m 5s",
                                  "verdict": "-"}
    assert row["verdict"] is None  # no step timing yet: no face shows a verdict (shown_verdict)


def test_a_final_job_row_names_the_reason_and_prefers_test_accuracy_without_eta():
    state = running_state()
    state.fold(ev("eval", split="test", accuracy=0.9, fp=0.0, fn=0.0, frames=4))
    state.fold_status(JobStatus(JobState.FAILED, reason="exit code 3"))
    row = job_summary(FakeJob(created=None), state, now=5000.0)
    assert row["status"] == "failed (exit code 3)" and row["final"] is True and row["eta_s"] is None
    assert (row["accuracy"], row["accuracy_split"]) == (0.9, "test") and row["age_s"] is None
    assert JobTable._row(row) == {"name": "lane-1", "backend": "local", "status": "failed (exit code 3)",
                                  "progress": "20%", "accuracy": "0.9000 test (last)", "age": "-",
                                  "verdict": "-"}


def test_a_job_whose_state_cannot_be_read_is_one_unknown_row_among_the_others():
    def read(job):
        if job.name == "broken":
            raise ConnectionError("cluster unreachable")
        return running_state()

    rows = job_summaries([FakeJob("ok"), FakeJob("broken"), FakeJob("ok-2")], read, now=1000.0)
    assert [r["name"] for r in rows] == ["ok", "broken", "ok-2"]
    broken = rows[1]
    assert broken["state"] == "unknown" and broken["error"] == "ConnectionError: cluster unreachable"
    assert broken["status"] == "unknown (ConnectionError: cluster unreachable)" and broken["final"] is False
    assert set(broken) == set(rows[0])  # the same fields, so a face needs no special case
    assert JobTable._row(broken) == {"name": "broken", "backend": "local",
                                     "status": "unknown (ConnectionError: cluster unreachable)",
                                     "progress": "-", "accuracy": "-", "age": "0s", "verdict": "-"}
    assert broken["verdict"] is None and broken["breakdown"] == {}


def timing(state: RunState, rank: int, step: int, t: float, data_s: float, compute_s: float) -> None:
    state.fold(ev("timing", t=t, rank=rank, step=step, steps=10, host=f"node-{rank}", device="cpu",
                  step_s=data_s + compute_s, data_s=data_s, compute_s=compute_s, exchange_s=0.0))


def test_the_row_carries_the_doctors_verdict_and_the_per_rank_breakdown():
    """Running or finished, the row names the bottleneck the doctor found; %lanejobs shows it."""
    state = running_state()
    state.fold(ev("start", config={"num_workers": 2, "use_workers": True}, total_steps=100))
    for i, t in enumerate((120.0, 130.0, 140.0)):
        for rank in (0, 1):
            timing(state, rank, 10 * (i + 1), t, data_s=0.5, compute_s=0.5)
    row = job_summary(FakeJob(), state, now=1125.0)
    assert row["verdict"]["kind"] == "input-bound" and row["verdict"]["severity"] == "warn"
    line = row["verdict"]["line"]
    assert line.startswith("input-bound: ranks wait 50% of each step for data; loader workers 2 -> try ")
    assert row["breakdown"]["1"]["data"] == pytest.approx(0.5) and set(row["breakdown"]) == {"0", "1"}
    assert JobTable._row(row)["verdict"] == line
    state.fold_status(JobStatus(JobState.SUCCEEDED))
    assert job_summary(FakeJob(), state)["verdict"] == row["verdict"]  # a finished job keeps its verdict
    table = JobTable([])
    table.rows = [JobTable._row(row)]
    assert line in table.table().text()
    assert "<th style='text-align:left;'>verdict</th>" in table.table().html()


def test_a_job_measuring_its_first_window_says_so_in_the_table():
    state = running_state()
    timing(state, 0, 10, 120.0, data_s=0.0, compute_s=0.5)
    row = job_summary(FakeJob(), state)
    assert row["verdict"]["kind"] == "unknown" and JobTable._row(row)["verdict"].startswith("unknown: measuring")
