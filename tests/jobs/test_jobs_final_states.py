"""Final states are never overwritten, cancel() respects an outcome that already happened,
and the registry is private and holds no secrets."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lanenb.backends.local.backend import LocalBackend
from lanenb.cli import main
from lanenb.jobs import Job, JobRegistry, JobState, TrainSpec, get_job


def _fresh_python(code: str) -> None:
    """Another kernel (a new interpreter with the same LANENB_HOME)."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ), check=False)
    assert out.returncode == 0, out.stderr


# ---------------------------------------------------------------- the registry rule
def test_registry_never_replaces_a_final_state(tmp_path):
    reg = JobRegistry(tmp_path / "jobs.sqlite3")
    reg.add("j", "local", {"dataset": "/d"}, None)
    assert reg.update("j", state="running", status={"state": "running"}) is True
    assert reg.update("j", state="cancelled", status={"state": "cancelled", "reason": "by user"}) is True
    # a poll that read "running" before the cancel lands after it
    assert reg.update("j", state="running", status={"state": "running"}) is False
    assert reg.update("j", status={"state": "running"}) is False
    assert reg.update("j", state="succeeded", status={"state": "succeeded"}) is False
    rec = reg.get("j")
    assert rec.state == "cancelled" and rec.status == {"state": "cancelled", "reason": "by user"}
    # the same final state may be written again (more detail), metrics may still be filled in
    assert reg.update("j", state="cancelled", status={"state": "cancelled", "reason": "by user", "exit_code": 130})
    assert reg.update("j", metrics={"accuracy": 0.5}) is True
    assert reg.get("j").metrics == {"accuracy": 0.5} and reg.get("j").status["exit_code"] == 130


def test_a_stale_running_poll_does_not_undo_another_kernels_cancel(tiny_job):
    job = tiny_job(steps=1000, delay=0.1, grace=1.0)
    name = job.name

    class CancelledMeanwhile(LocalBackend):
        """Reads the live state, then another kernel cancels before this one records it."""

        def status(self, spec, handle):
            seen = super().status(spec, handle)
            if seen.state is JobState.RUNNING:
                _fresh_python(f"from lanenb.jobs import get_job; get_job({name!r}).cancel()")
            return seen

    slow = Job(JobRegistry().get(name), JobRegistry(), CancelledMeanwhile(grace=1.0))
    status = slow.status()
    assert status.state is JobState.CANCELLED
    assert JobRegistry().get(name).state == "cancelled"
    assert get_job(name).wait(timeout=5).state is JobState.CANCELLED


def test_cancel_of_a_job_that_already_succeeded_keeps_its_outcome(tiny_job):
    job = tiny_job(steps=2)
    run = Path(job.run_dir)
    # finished, but no one has polled it yet: the record still says running
    import time

    deadline = time.monotonic() + 60
    while not (run / "exit.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert JobRegistry().get(job.name).state == "running"

    cancels = []

    class Spy(LocalBackend):
        def cancel(self, spec, handle):
            cancels.append(handle)
            super().cancel(spec, handle)

    status = Job(JobRegistry().get(job.name), JobRegistry(), Spy()).cancel()
    assert status.state is JobState.SUCCEEDED
    assert cancels == [], "cancel() must not act on a job that already succeeded"
    assert get_job(job.name).status().state is JobState.SUCCEEDED
    assert get_job(job.name).metrics is not None
    assert not (run / "cancel.json").exists()


# ---------------------------------------------------------------- private, secret-free
def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_home_registry_and_run_dirs_are_private(tiny_job, lanenb_home, tmp_path):
    old = os.umask(0o022)
    try:
        job = tiny_job(steps=1)
        job.wait(timeout=60)
        assert _mode(lanenb_home) == 0o700
        assert _mode(lanenb_home / "jobs.sqlite3") == 0o600
        assert _mode(Path(job.run_dir)) == 0o700
        nested = tmp_path / "new" / "deeper" / "run"
        from lanenb.jobs import submit

        second = submit(TrainSpec(dataset=str(tmp_path), processes=1, run_dir=str(nested)),
                        program=[sys.executable, "-c", "pass"], trainer_args=False)
        second.wait(timeout=60)
        assert [_mode(p) for p in (tmp_path / "new", tmp_path / "new" / "deeper", nested)] == [0o700] * 3
    finally:
        os.umask(old)


def test_secret_env_values_reach_the_ranks_but_never_the_registry_or_jobs_show(tiny_job, lanenb_home, capsys):
    secret = "hf_do_not_store_me"
    job = tiny_job(steps=1, env={"HF_TOKEN": secret, "LANE_TEST": "visible"})
    assert job.wait(timeout=60).state is JobState.SUCCEEDED
    assert any(ln.text.endswith("env=visible token=set") for ln in job.logs())  # the ranks got it
    for path in lanenb_home.glob("jobs.sqlite3*"):
        assert secret.encode() not in path.read_bytes(), f"secret stored in {path.name}"
    assert get_job(job.name).spec.env["HF_TOKEN"] == "<redacted>"
    assert get_job(job.name).spec.env["LANE_TEST"] == "visible"
    assert main(["jobs", "show", job.name]) == 0
    out = capsys.readouterr().out
    assert secret not in out and "<redacted>" in out


def test_describe_redacts_rows_written_before_redaction(tmp_path):
    reg = JobRegistry(tmp_path / "jobs.sqlite3")
    reg.add("old", "local", {"dataset": "/d"}, None)
    with reg._write() as conn:  # a row as older lanenb versions stored it
        conn.execute("UPDATE jobs SET spec=? WHERE name='old'",
                     ('{"dataset": "/d", "env": {"DB_PASSWORD": "pw123456"}}',))
    info = Job(reg.get("old"), reg).describe()
    assert info["spec"]["env"] == {"DB_PASSWORD": "<redacted>"}


@pytest.mark.parametrize("existing", [True, False])
def test_make_private_dir_keeps_existing_modes(tmp_path, existing):
    from lanenb.home import make_private_dir

    target = tmp_path / "x"
    if existing:
        target.mkdir(mode=0o755)
        os.chmod(target, 0o755)
    make_private_dir(target / "y")
    assert _mode(target) == (0o755 if existing else 0o700) and _mode(target / "y") == 0o700


def test_an_older_world_readable_registry_becomes_owner_only(tmp_path):
    path = tmp_path / "jobs.sqlite3"
    JobRegistry(path).add("j", "local", {"dataset": "/d"}, None)
    for part in tmp_path.glob("jobs.sqlite3*"):
        os.chmod(part, 0o644)
    JobRegistry(path)
    assert {p.name: _mode(p) for p in tmp_path.glob("jobs.sqlite3*")} == {
        p.name: 0o600 for p in tmp_path.glob("jobs.sqlite3*")}
    assert JobRegistry(path).get("j").state == "pending"
