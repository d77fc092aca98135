"""``lanenb jobs`` commands over a real tiny local job."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time

import pytest

from lanenb.cli import main


def test_jobs_cli_list_show_logs_wait(tiny_job, capsys):
    job = tiny_job(steps=2)
    assert main(["jobs", "wait", job.name, "--timeout", "60"]) == 0
    assert capsys.readouterr().out.strip() == f"{job.name}: succeeded"

    assert main(["jobs", "list"]) == 0
    out = capsys.readouterr().out
    assert job.name in out and "succeeded" in out

    assert main(["jobs", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["name"] == job.name and rows[0]["metrics"]["accuracy"] == 0.52

    assert main(["jobs", "logs", job.name, "--worker", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "[1] bye from rank 1" in out and not any(line.startswith("[0]") for line in out)

    assert main(["jobs", "logs", job.name, "--events"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted((e["rank"], e["step"]) for e in events) == [(0, 0), (0, 1), (1, 0), (1, 1)]

    assert main(["jobs", "show", job.name]) == 0
    first, rest = capsys.readouterr().out.split("\n", 1)
    assert first == "unknown: no step timing yet"  # the tiny program reports no timing
    info = json.loads(rest)
    assert info["state"] == "succeeded" and info["backend_detail"]["exit"]["returncode"] == 0
    assert info["verdict"]["kind"] == "unknown"
    assert main(["jobs", "show", job.name, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"]["line"] == first


def test_jobs_cli_wait_timeout_and_cancel(tiny_job, capsys):
    job = tiny_job(steps=300, delay=0.1)
    assert main(["jobs", "wait", job.name, "--timeout", "0.2"]) == 124
    assert f"job '{job.name}' is still running after 0.2 s" in capsys.readouterr().err
    assert main(["jobs", "cancel", job.name]) == 0
    assert capsys.readouterr().out.strip() == f"{job.name}: cancelled: cancelled by user"
    assert main(["jobs", "wait", job.name]) == 1


TIMING_PROGRAM = textwrap.dedent(
    """
    import json, os, sys, time
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    slow = float(sys.argv[1])  # rank 1's compute per step over rank 0's
    for window in range(1, 4):
        busy = 0.2 * (slow if rank == 1 else 1.0)
        wait = 0.2 * (slow - 1.0) if rank == 0 else 0.0
        print("@lanenb " + json.dumps({"v": 1, "t": time.time(), "rank": rank, "kind": "timing", "step": 10 * window,
              "steps": 10, "host": f"host-{rank}", "device": "cpu", "step_s": busy + wait + 0.01, "data_s": 0.0,
              "h2d_s": 0.0, "compute_s": busy, "exchange_s": wait + 0.01, "optimizer_s": 0.0, "other_s": 0.0,
              "pause_s": 0.0, "pause": []}), flush=True)
    open(os.path.join(os.environ["LANE_RUN_DIR"], f"reported-{rank}"), "w").close()
    time.sleep(float(sys.argv[2]))
    """
)


@pytest.mark.parametrize("keep_running", [True, False])
def test_jobs_show_names_the_bottleneck_of_a_running_or_finished_job(rank_program, tmp_path, capsys, keep_running):
    """`lanenb jobs show` starts with the doctor's line, read from every rank's timing events
    in the job's log (a run dir's events.jsonl holds rank 0's only)."""
    from lanenb.jobs import TrainSpec, submit

    program = tmp_path / "timing_rank.py"
    program.write_text(TIMING_PROGRAM)
    run_dir = tmp_path / "run"
    spec = TrainSpec(dataset=str(tmp_path), processes=2, run_dir=str(run_dir), env={"LANE_RUN_DIR": str(run_dir)})
    job = submit(spec, program=[sys.executable, str(program), "1.5", "60" if keep_running else "0"],
                 trainer_args=False, grace=2.0)
    try:
        if keep_running:
            deadline = time.monotonic() + 60
            while not all((run_dir / f"reported-{r}").exists() for r in (0, 1)) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)  # the supervisor copies the lines to job.log
        else:
            assert job.wait(timeout=60).state.value == "succeeded"
        assert main(["jobs", "show", job.name]) == 0
        line = capsys.readouterr().out.splitlines()[0]
        assert line.startswith("straggler: rank 1 is a straggler: its steps take 1.5x the others' and every "
                               "all-reduce waits for it (host host-1)")
        assert job.status().state.finished is not keep_running
    finally:
        if keep_running:
            job.cancel()


def test_jobs_show_rejects_a_bad_line_count(tiny_job, capsys):
    job = tiny_job(steps=1)
    assert main(["jobs", "show", job.name, "--lines", "0"]) == 2
    assert "--lines must be >= 1, got 0" in capsys.readouterr().err


def test_jobs_cli_unknown_job(capsys):
    assert main(["jobs", "logs", "no-such-job"]) == 2
    assert "no job named 'no-such-job'" in capsys.readouterr().err


def test_jobs_list_never_shows_a_dead_local_job_running(tiny_job, capsys):
    """Issue 51: `lanenb jobs list` showed a job whose processes were killed as `running` until
    something called `show` or `--refresh`. A local job's state is a process check: always asked."""
    import json as _json
    import signal as _signal

    from polling import wait_for

    from lanenb.jobs import JobRegistry

    job = tiny_job(steps=300, delay=0.1)
    wait_for(lambda: any(line.text.startswith("hello") for line in job.logs()), 20)
    os.kill(job.handle["pid"], _signal.SIGKILL)  # the supervisor: the job is lost, the registry says running
    wait_for(lambda: job.backend._supervisor(job.handle) is None, 10)
    assert JobRegistry().get(job.name).state == "running"
    assert main(["jobs", "list", "--json"]) == 0
    (row,) = _json.loads(capsys.readouterr().out)
    assert row["state"] in ("lost", "failed") and row["as_of"] is None
    job.cancel()


def test_jobs_list_marks_a_remote_jobs_recorded_state_with_its_time(capsys):
    """A cluster job's state is shown as recorded (asking every cluster would make the list slow):
    the table says so, with the time, and how to ask."""
    from lanenb.jobs import JobRegistry

    reg = JobRegistry()
    reg.add("lane-remote", "kubernetes", {"dataset": "/mnt/data", "backend": "kubernetes"}, None)
    reg.update("lane-remote", state="running")
    assert main(["jobs", "list"]) == 0
    out = capsys.readouterr().out
    assert "running*" in out and "* as recorded, the oldest at " in out and "--refresh asks the cluster" in out
