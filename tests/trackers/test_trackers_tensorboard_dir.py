"""``job.tensorboard_dir`` / ``lanenb.trackers.tensorboard_dir``: where ``%tensorboard --logdir`` points."""

from __future__ import annotations

from pathlib import Path

import pytest

from lanenb.errors import UserError
from lanenb.jobs import JobNotFoundError
from lanenb.registry.jobs import JobRegistry
from lanenb.trackers import tensorboard_dir
from lanenb.trackers.jobref import job_of


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    return JobRegistry()


def test_a_jobs_log_dir_is_under_its_run_dir(registry, tmp_path):
    registry.add("lane-a", "local", {"dataset": str(tmp_path)}, str(tmp_path / "runs" / "lane-a"))
    registry.add("lane-k", "kubernetes", {"dataset": "/mnt/data"}, "/mnt/runs/lane-k")
    assert tensorboard_dir("lane-a") == tmp_path / "runs" / "lane-a" / "tensorboard"
    assert job_of("lane-a").tensorboard_dir == str(tmp_path / "runs" / "lane-a" / "tensorboard")
    assert tensorboard_dir(job_of("lane-k")) == Path("/mnt/runs/lane-k/tensorboard")  # the path on the PVC


@pytest.mark.parametrize("run, error, words", [
    ("no-such-job", JobNotFoundError, "no-such-job"),
    ("", UserError, "run='': expected a Job or a job name"),
    (42, UserError, "run=42: expected a Job or a job name"),
])
def test_bad_runs_are_named(registry, run, error, words):
    with pytest.raises(error, match=words):
        tensorboard_dir(run)


def test_a_job_without_a_run_dir_has_no_log_dir(registry, tmp_path):
    registry.add("fetch-1", "kubernetes-fetch", {"dataset": "tusimple"}, None)
    with pytest.raises(UserError, match="job 'fetch-1' has no run dir"):
        tensorboard_dir("fetch-1")


def test_the_cli_prints_it(registry, tmp_path, capsys):
    from lanenb.cli import main

    registry.add("lane-a", "local", {"dataset": str(tmp_path)}, str(tmp_path / "run"))
    assert main(["jobs", "tensorboard", "lane-a"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "run" / "tensorboard")
    assert main(["jobs", "tensorboard", "nope"]) == 2
