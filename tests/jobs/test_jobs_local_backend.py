"""Real local jobs: a tiny MPI program under the real mpirun and the real supervisor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from polling import alive, wait_for

from lanenb.jobs import JobState, TrainSpec, get_job, list_jobs, submit


def _fresh_python(code: str, timeout: float = 60) -> str:
    """Run code in a new interpreter (a 'restarted kernel') with the same LANENB_HOME."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=timeout, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_job_runs_logs_events_and_records_metrics(tiny_job):
    job = tiny_job(steps=4, env={"LANE_TEST": "xyz"})
    status = job.wait(timeout=60)
    assert status.state is JobState.SUCCEEDED, status
    lines = list(job.logs())
    assert {ln.rank for ln in lines if ln.rank is not None} == {0, 1}
    assert {ln.source for ln in lines} == {"launcher", "supervisor"}
    # spec.env reaches the ranks
    assert any(ln.rank == 1 and ln.text == "hello from rank 1 env=xyz token=missing" for ln in lines)
    steps = [(ev.rank, ev["step"]) for ev in job.events()]
    assert sorted(steps) == sorted((r, s) for r in (0, 1) for s in range(4))
    assert [ln.text for ln in job.logs(worker=1) if ln.text.startswith("bye")] == ["bye from rank 1"]
    assert job.metrics == {"accuracy": 0.54, "best_epoch": 1}
    rec = json.loads(_fresh_python(f"""
        import json
        from lanenb.jobs import JobRegistry
        r = JobRegistry().get({job.name!r})
        print(json.dumps({{"state": r.state, "metrics": r.metrics, "run_dir": r.run_dir, "backend": r.backend}}))
    """))
    assert rec == {"state": "succeeded", "metrics": {"accuracy": 0.54, "best_epoch": 1},
                   "run_dir": job.run_dir, "backend": "local"}


def test_submit_returns_before_the_job_finishes(tiny_job):
    t0 = time.perf_counter()
    job = tiny_job(steps=40, delay=0.1)
    elapsed = time.perf_counter() - t0
    try:
        assert job.status().state is JobState.RUNNING  # 2 ranks x 4 s: cannot be over yet
        assert elapsed < 3.0  # generous: the <0.5 s goal is measured in bench/jobs_local.py
    finally:
        job.cancel()


def test_fresh_process_reattaches_to_logs_and_status(tiny_job):
    job = tiny_job(steps=15, delay=0.1)
    wait_for(lambda: any(ev.kind == "step" for ev in job.events()), what="first step event")
    out = _fresh_python(f"""
        import json
        from lanenb.jobs import get_job
        job = get_job({job.name!r})
        first = job.status().state.value
        steps = [(ev.rank, ev["step"]) for ev in job.events(follow=True)]  # tails until the job ends
        print(json.dumps({{"first": first, "steps": steps, "final": job.status().state.value}}))
    """)
    data = json.loads(out)
    assert data["first"] == "running"
    assert data["final"] == "succeeded"
    assert sorted(map(tuple, data["steps"])) == sorted((r, s) for r in (0, 1) for s in range(15))
    assert get_job(job.name).status().state is JobState.SUCCEEDED


def test_job_survives_the_submitting_process_exiting(rank_program, tmp_path):
    """The 'kernel' that submitted dies; training goes on and a new kernel sees it finish."""
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    run_dir = tmp_path / "run"
    name = _fresh_python(f"""
        import sys
        from lanenb.jobs import TrainSpec, submit
        spec = TrainSpec(dataset={str(tmp_path)!r}, processes=2, run_dir={str(run_dir)!r},
                         env={{"LANE_RUN_DIR": {str(run_dir)!r}}})
        job = submit(spec, program=[sys.executable, {str(rank_program)!r}, "10", "0.1", {str(pid_dir)!r}],
                     trainer_args=False)
        print(job.name)
    """).strip()
    job = get_job(name)
    assert job.status().state is JobState.RUNNING
    assert job.wait(timeout=60).state is JobState.SUCCEEDED
    assert job.metrics is not None and job.metrics["accuracy"] == pytest.approx(0.6)


def test_cancel_stops_every_rank(tiny_job):
    job = tiny_job(steps=1000, delay=0.1, mode="stubborn", grace=1.0)
    pid_dir: Path = tiny_job.pid_dir
    wait_for(lambda: len(list(pid_dir.glob("rank*.pid"))) == 2 and any(True for _ in job.events()),
              what="both ranks started")
    rank_pids = [int(p.read_text()) for p in pid_dir.glob("rank*.pid")]
    group = [p.pid for p in job.backend._group_processes(job.handle)]
    assert set(rank_pids) <= set(group) and all(alive(p) for p in rank_pids)
    status = job.cancel()
    assert status.state is JobState.CANCELLED
    survivors = [p for p in rank_pids + group if alive(p)]
    assert survivors == [], f"processes survived cancel: {survivors}"
    again = get_job(job.name)
    assert again.status().state is JobState.CANCELLED
    assert again.wait(timeout=1).state is JobState.CANCELLED


def test_failed_job_reports_exit_code_and_error_event(tiny_job):
    job = tiny_job(steps=2, mode="fail")
    status = job.wait(timeout=60)
    assert status.state is JobState.FAILED
    assert status.exit_code not in (0, None)
    assert "launcher exited with code" in status.reason
    assert "rank 1 reported: loss is NaN" in status.reason
    assert job.metrics is None


def test_wait_timeout_names_the_job_and_state(tiny_job):
    job = tiny_job(steps=200, delay=0.1)
    try:
        with pytest.raises(TimeoutError, match=rf"job '{job.name}' is still running after 0.3 s"):
            job.wait(timeout=0.3)
        with pytest.raises(ValueError, match=r"timeout=-1: must be >= 0"):
            job.wait(timeout=-1)
    finally:
        job.cancel()


def test_missing_launcher_program_fails_with_reason(tmp_path):
    job = submit(TrainSpec(dataset=str(tmp_path), processes=1, run_dir=str(tmp_path / "r")),
                 program=["/nonexistent/rank-program"], trainer_args=False)
    status = job.wait(timeout=60)
    assert status.state is JobState.FAILED
    assert status.exit_code != 0


def test_whole_tree_killed_without_exit_file_is_lost_and_wait_returns(tiny_job):
    job = tiny_job(steps=1000, delay=0.1, grace=1.0)
    wait_for(lambda: any(True for _ in job.events()), what="first event")
    procs = job.backend._group_processes(job.handle)
    for proc in procs:
        proc.kill()
    psutil.wait_procs(procs, timeout=10)
    job.backend._supervisor(job.handle)  # reaps our own child
    status = job.wait(timeout=10)
    assert status.state is JobState.LOST
    assert "is gone without recording an exit status" in status.reason
    assert get_job(job.name).status().state is JobState.LOST  # recorded, final


def test_list_jobs_and_duplicate_names(tiny_job, tmp_path):
    from lanenb.jobs import JobExistsError, JobNotFoundError

    job = tiny_job(steps=1, name="my-job")
    job.wait(timeout=60)
    assert [j.name for j in list_jobs()] == ["my-job"]
    (tmp_path / "label_data_0313.json").write_text("")  # a dataset root, as far as a launch checks
    with pytest.raises(JobExistsError, match="a job named 'my-job' already exists"):
        submit(TrainSpec(dataset=str(tmp_path), name="my-job"))
    with pytest.raises(JobNotFoundError, match=r"no job named 'nope'.*recent jobs: my-job"):
        get_job("nope")


def test_a_submit_that_failed_to_start_frees_its_name(tmp_path, monkeypatch):
    from lanenb.backends.local import backend as local
    from lanenb.jobs import JobRegistry

    def broken_popen(*args, **kwargs):
        raise OSError("no more processes")

    spec = TrainSpec(dataset=str(tmp_path), processes=1, name="retry-me")
    with monkeypatch.context() as m:
        m.setattr(local.subprocess, "Popen", broken_popen)
        with pytest.raises(OSError, match="no more processes"):
            submit(spec, program=[sys.executable, "-c", "pass"], trainer_args=False)
    rec = JobRegistry().get("retry-me")
    assert rec.state == "failed" and "submit failed: no more processes" in rec.status["reason"]
    job = submit(spec, program=[sys.executable, "-c", "print('second try')"], trainer_args=False)
    assert job.wait(timeout=60).state is JobState.SUCCEEDED
    assert [ln.text for ln in job.logs() if ln.rank is not None] == ["second try"]


def test_a_job_from_another_host_is_unknown_and_not_signalled(tmp_path):
    from lanenb.backends.local.backend import LocalBackend

    spec = TrainSpec(dataset=str(tmp_path))
    handle = {"pid": os.getpid(), "pgid": os.getpgid(0), "create_time": None, "host": "elsewhere-42",
              "run_dir": str(tmp_path), "log": str(tmp_path / "job.log")}
    backend = LocalBackend()
    status = backend.status(spec, handle)
    assert status.state is JobState.UNKNOWN and "runs on host 'elsewhere-42'" in status.reason
    with pytest.raises(RuntimeError, match="job runs on host 'elsewhere-42'; cancel it from that machine"):
        backend.cancel(spec, handle)
    assert alive(os.getpid())


def test_local_submit_without_a_run_dir_says_it_needs_one(tmp_path):
    """``Backend.submit`` allows None (remote backends choose a path); the local backend needs a
    directory here, and says so before it creates or starts anything."""
    from lanenb.backends.local.backend import LocalBackend

    with pytest.raises(TypeError, match="run_dir must be a path, not None"):
        LocalBackend().submit(TrainSpec(dataset=str(tmp_path)), None)
    assert list(tmp_path.iterdir()) == []
