"""The run doctor against injected faults: real 2-rank jobs through the Job API (local backend,
real mpirun, small model, synthetic frames), each fault switched on from outside the run once it
is past start-up; the verdict (``diagnose`` on the ``RunState`` a view folds from ``Job.poll``)
must name the fault within 30 s of its start, and a normal run must get no false verdict."""

from __future__ import annotations

import socket

import pytest
from doctor_support import (
    VERDICT_DEADLINE_S,
    VerdictWatch,
    busy_elsewhere,
    doctor_spec,
    input_bound_run,
    job_feed,
    log_tail,
    stop_job,
    straggler_run,
)

from lanenb.analysis.summary import job_summary
from lanenb.jobs import JobState, submit

pytestmark = pytest.mark.slow


def test_slow_dataset_is_named_input_bound_with_the_loader_advice(doctor_data, tmp_path):
    outcome, _job = input_bound_run(doctor_data, tmp_path)
    assert outcome.before.kind != "input-bound", outcome.explain()  # the fault, not the set-up, caused it
    assert outcome.hit is not None and outcome.delay_s is not None, outcome.explain()
    assert outcome.delay_s <= VERDICT_DEADLINE_S, outcome.explain()
    verdict = outcome.hit.verdict
    assert str(verdict).startswith("input-bound: "), str(verdict)
    assert "worker" in verdict.action, verdict.action  # the loader-worker suggestion
    assert "data" in verdict.message, verdict.message


def test_rank_slowed_from_outside_is_named_straggler_with_its_host(doctor_data, tmp_path):
    outcome, _job = straggler_run(doctor_data, tmp_path, rank=1)
    assert outcome.before.kind != "straggler", outcome.explain()
    assert outcome.hit is not None and outcome.delay_s is not None, outcome.explain()
    assert outcome.delay_s <= VERDICT_DEADLINE_S, outcome.explain()
    verdict = outcome.hit.verdict
    host = socket.gethostname()  # both local ranks run here
    assert (verdict.rank, verdict.host) == (1, host), outcome.explain()
    line = str(verdict)
    assert line.startswith("straggler: ") and "rank 1" in line and host in line, line


def test_normal_run_gets_no_false_verdict(doctor_data, tmp_path):
    # validation and a checkpoint every epoch: the pauses must not read as a bottleneck
    job = submit(doctor_spec(doctor_data, tmp_path / "run", epochs=3, use_val=True))
    watch = VerdictWatch(job_feed(job))
    try:
        watch.until(lambda: False, 400)  # to the end of the run
    finally:
        stop_job(job)
    assert job.status().state is JobState.SUCCEEDED, log_tail(job)
    kinds = {s.verdict.kind for s in watch.sightings}
    assert kinds <= {"unknown", "healthy"}, watch.story() + busy_elsewhere()
    assert "healthy" in kinds and watch.min_windows(2) >= 3, (watch.windows, watch.story())
    row = job_summary(job, watch.state)  # the finished job's row says the same
    assert row["verdict"]["kind"] == "healthy" and row["verdict"]["line"].startswith("healthy: "), row
