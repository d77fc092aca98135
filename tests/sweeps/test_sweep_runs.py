"""Real sweeps: each trial is a lanenb job of real mpirun ranks; Optuna prunes, the driver
cancels through the Job API, and a driver killed -9 continues without re-running a trial."""

from __future__ import annotations

import os
import signal
import time

import pytest

from lanenb.jobs import JobState, TrainSpec, get_job, list_jobs
from lanenb.sweeps import attach, sweep
from lanenb.sweeps.driver import pid_file

pytestmark = pytest.mark.slow


def _spec(data, epochs: int = 3) -> TrainSpec:
    return TrainSpec(dataset=str(data), processes=1, epochs=epochs, batch_size=4,
                     extra_args=["--img-height", "64", "--img-width", "160", "--log-every", "5"])


def _until(check, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s")


def test_a_sweep_runs_trials_as_jobs_and_prunes_the_loser(sweep_data):
    # two trainable learning rates first, then one that cannot learn in 3 epochs: the median
    # pruner stops it once its validation result falls below the others' at the same epoch
    s = sweep(_spec(sweep_data), {"lr": "1e-6..1e-1:log"}, name="lr-search", trials=3, pruner="median",
              first=[{"lr": 0.01}, {"lr": 0.02}, {"lr": 1e-6}])
    assert s.wait(timeout=400) == "finished", s.log()
    rows = s.trials()
    assert [r.job for r in rows] == ["lr-search-0", "lr-search-1", "lr-search-2"]
    assert [r.state for r in rows[:2]] == ["complete", "complete"], s.log()
    loser = rows[2]
    assert loser.state == "pruned" and loser.epochs < 3, s.log()
    assert loser.why.startswith(f"pruned at epoch {loser.epochs}: val.accuracy ") and "median there" in loser.why
    assert get_job("lr-search-2").status().state is JobState.CANCELLED  # stopped through the Job API
    assert {j.name for j in list_jobs()} >= {"lr-search-0", "lr-search-1", "lr-search-2"}  # ordinary jobs
    best = s.best
    assert best["number"] in (0, 1) and best["value"] == max(r.value for r in rows[:2])
    assert best["params"] == rows[best["number"]].params and best["objective"] == "val.accuracy"
    again = attach("lr-search")  # another kernel's view: the same study
    assert [r.to_dict() for r in again.trials()] == [r.to_dict() for r in rows]
    assert s.curves()[0].keys() == {1, 2, 3}  # every epoch's validation result, as it arrived
    report = s.report()
    chart = report.chart()
    titles = [part["title"]["text"] for part in chart["hconcat"]]
    assert titles == ["each trial", "best so far", "val.accuracy vs lr"]
    curve_points = chart["hconcat"][0]["data"]["values"]
    assert {p["trial"] for p in curve_points if p["pruned"]} == {"2"}  # drawn dashed
    best_line = [p["best"] for p in chart["hconcat"][1]["data"]["values"]]
    assert best_line[-1] == best["value"]
    assert report.png().startswith(b"\x89PNG") and report.table().chart  # headless and interactive
    # the winner again, on train + validation, at twice the batch: the rate follows (linear rule)
    again_job = s.retrain(batch_size=8)
    assert again_job.name == "lr-search-best" and again_job.spec.batch_size == 8 and not again_job.spec.use_val
    assert again_job.spec.extra_args[-2:] == ["--lr", str(2 * best["params"]["lr"])]
    assert again_job.wait(timeout=300).state is JobState.SUCCEEDED


def test_a_driver_killed_minus_9_continues_without_rerunning_a_trial(sweep_data):
    s = sweep(_spec(sweep_data, epochs=2), {"lr": "1e-3..3e-2:log"}, name="crashy", trials=2, seed=1)
    _until(lambda: any(j.name == "crashy-0" for j in list_jobs()))
    driver = s._driver()
    os.kill(driver.pid, signal.SIGKILL)  # no chance to clean up
    _until(lambda: s._driver() is None, 30)
    first_job = get_job("crashy-0")
    first_job.wait(timeout=300)  # the trial's job lives on without its driver
    assert s.state == "interrupted"
    assert pid_file("crashy").exists()  # what the dead driver left; the next one replaces it
    assert s.resume().wait(timeout=400) == "finished", s.log()
    rows = s.trials()
    assert [(r.number, r.state) for r in rows] == [(0, "complete"), (1, "complete")], s.log()
    assert sorted(j.name for j in list_jobs() if j.name.startswith("crashy")) == ["crashy-0", "crashy-1"]
    assert "trial 0: following crashy-0 again" in s.log()
    assert rows[0].value is not None and rows[0].epochs == 2


def test_stopping_a_sweep_cancels_its_running_trial(sweep_data):
    s = sweep(_spec(sweep_data, epochs=20), {"lr": "1e-3..3e-2:log"}, name="halt", trials=3)
    _until(lambda: get_job("halt-0").status().state is JobState.RUNNING if any(
        j.name == "halt-0" for j in list_jobs()) else False)
    assert s.stop(timeout=120) == "stopped"
    assert get_job("halt-0").wait(timeout=60).state is JobState.CANCELLED
    assert [(r.state, r.why) for r in s.trials()] == [("failed", "stopped with the sweep")]
