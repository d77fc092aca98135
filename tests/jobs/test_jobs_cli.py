"""``lanenb jobs`` commands over a real tiny local job."""

from __future__ import annotations

import json

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
    info = json.loads(capsys.readouterr().out)
    assert info["state"] == "succeeded" and info["backend_detail"]["exit"]["returncode"] == 0


def test_jobs_cli_wait_timeout_and_cancel(tiny_job, capsys):
    job = tiny_job(steps=300, delay=0.1)
    assert main(["jobs", "wait", job.name, "--timeout", "0.2"]) == 124
    assert f"job '{job.name}' is still running after 0.2 s" in capsys.readouterr().err
    assert main(["jobs", "cancel", job.name]) == 0
    assert capsys.readouterr().out.strip() == f"{job.name}: cancelled: cancelled by user"
    assert main(["jobs", "wait", job.name]) == 1


def test_jobs_cli_unknown_job(capsys):
    assert main(["jobs", "logs", "no-such-job"]) == 2
    assert "no job named 'no-such-job'" in capsys.readouterr().err
