"""Local jobs under crashes, cancels and a full disk: the ranks never outlive their job, a
slow rank gets to say it was cancelled, and every job ends in a final state with a reason."""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from pathlib import Path

import psutil
import pytest
from polling import alive, wait_for

from lanenb.jobs import JobRegistry, JobState, get_job
from lanenb_trainer.events import parse_line


def _started_ranks(job, pid_dir: Path) -> list[int]:
    """Both ranks running and logging; their pids as the ranks wrote them."""
    wait_for(lambda: len(list(pid_dir.glob("rank*.pid"))) == 2 and sum(
        1 for ev in job.events() if ev.kind == "step") >= 2, what="both ranks started")
    return [int(p.read_text()) for p in sorted(pid_dir.glob("rank*.pid"))]


def _mpirun(job) -> psutil.Process:
    sup = job.backend._supervisor(job.handle)
    assert sup is not None
    (child,) = sup.children()
    return child


# ---------------------------------------------------------------- item 12: ranks die with the job
def test_quiet_ranks_die_when_the_supervisor_is_killed(tiny_job):
    # one step, then a minute without output: nothing ever writes to the dead pipe
    job = tiny_job(steps=2, delay=60.0, grace=1.0)
    ranks = _started_ranks(job, tiny_job.pid_dir)
    mpirun = _mpirun(job)
    os.kill(job.handle["pid"], signal.SIGKILL)
    wait_for(lambda: not any(alive(p) for p in [*ranks, mpirun.pid]), timeout=20,
              what="mpirun and the quiet ranks to die with their supervisor")
    job.backend._supervisor(job.handle)  # reaps our own child
    status = job.wait(timeout=10)
    assert status.state is JobState.LOST
    assert "gone without recording an exit status" in status.reason


def test_ranks_die_when_mpirun_is_killed_and_the_job_fails(tiny_job):
    job = tiny_job(steps=2, delay=60.0, grace=1.0)
    ranks = _started_ranks(job, tiny_job.pid_dir)
    _mpirun(job).kill()
    wait_for(lambda: not any(alive(p) for p in ranks), timeout=20, what="the ranks to die with mpirun")
    status = job.wait(timeout=30)
    assert status.state is JobState.FAILED and status.exit_code == -signal.SIGKILL
    assert "launcher exited with code -9" in status.reason


def test_cancel_reaches_running_ranks_whatever_the_record_says(tiny_job):
    job = tiny_job(steps=1000, delay=0.1, grace=1.0)
    ranks = _started_ranks(job, tiny_job.pid_dir)
    # another kernel (or an old poll) recorded a final state while the ranks still run
    JobRegistry().update(job.name, state="failed", status={"state": "failed", "reason": "stale record"})
    status = get_job(job.name).cancel()
    assert status.state is JobState.FAILED and status.reason == "stale record"  # never overwritten
    survivors = [p for p in ranks if alive(p)]
    assert survivors == [], f"ranks survived cancel of a job recorded as failed: {survivors}"


def test_recorded_rank_pids_point_at_the_ranks(tiny_job):
    job = tiny_job(steps=1000, delay=0.1, grace=1.0)
    ranks = _started_ranks(job, tiny_job.pid_dir)
    recorded = wait_for(lambda: len(job.backend._recorded_ranks(job.handle)) == 2
                         and job.backend._recorded_ranks(job.handle), what="pid records")
    assert sorted(p.pid for p in recorded) == sorted(ranks)  # the guard exec'd: same pid as the rank
    job.cancel()


# ---------------------------------------------------------------- item 13: one signal, then escalate
def test_cancel_gives_a_slow_rank_time_to_write_its_cancelled_event(tiny_job):
    job = tiny_job(steps=1000, delay=0.1, mode="slowstop", grace=6.0)
    ranks = _started_ranks(job, tiny_job.pid_dir)
    status = job.cancel()
    assert status.state is JobState.CANCELLED
    assert not any(alive(p) for p in ranks)
    job.wait(timeout=30)
    lines = [ln for ln in job.logs()]
    ends = {ln.rank: parse_line(ln.text).get("status") for ln in lines
            if parse_line(ln.text) is not None and parse_line(ln.text).kind == "end"}
    assert ends == {0: "cancelled", 1: "cancelled"}, [ln.text for ln in lines][-20:]
    got = [ln.text for ln in lines if "got signal" in ln.text]
    assert sorted(got) == ["rank 0 got signal 15", "rank 1 got signal 15"]  # one SIGTERM each


# ---------------------------------------------------------------- item 14: full disk, log cap
def test_a_log_the_disk_cannot_hold_still_ends_the_job_with_a_message(tiny_job):
    job = tiny_job(steps=40, delay=0.02, mode="chatty", grace=1.0)
    limit = 6000  # bytes: a few lines of job.log, then every write fails (EFBIG, as ENOSPC)
    resource.prlimit(job.handle["pid"], resource.RLIMIT_FSIZE, (limit, limit))
    status = job.wait(timeout=60)
    assert status.state is JobState.SUCCEEDED, status
    assert status.message and "job.log is incomplete" in status.message and "File too large" in status.message
    assert job.metrics is not None  # the run itself was not harmed
    assert Path(job.handle["log"]).stat().st_size <= limit
    exit_info = json.loads((Path(job.run_dir) / "exit.json").read_text())
    assert exit_info["returncode"] == 0 and exit_info["log_lines_dropped"] > 0


def test_job_log_is_capped_but_keeps_events(tiny_job):
    cap = 4000
    job = tiny_job(steps=60, delay=0.01, mode="chatty", grace=1.0, backend_opts={"max_log_bytes": cap})
    status = job.wait(timeout=60)
    assert status.state is JobState.SUCCEEDED
    assert "job.log was capped" in status.message
    size = Path(job.handle["log"]).stat().st_size
    assert size <= 2 * cap + 2000  # + the supervisor's own closing lines
    texts = [ln.text for ln in job.logs()]
    assert any("job.log reached 4000 bytes" in t for t in texts)
    steps = [parse_line(t) for t in texts if parse_line(t) is not None]
    plain_after_cap = texts[next(i for i, t in enumerate(texts) if "job.log reached" in t) + 1:]
    assert not any(t.startswith("plain line") for t in plain_after_cap)
    assert len(steps) > sum(1 for t in texts if t.startswith("plain line"))  # events kept longer


@pytest.mark.parametrize("bad", [{"max_log_bytes": 0}, {"max_log_bytes": 1.5}, {"grace": -1},
                                 {"grace": float("nan")}])
def test_bad_backend_options_are_named(bad):
    from lanenb.backends.local.backend import LocalBackend

    key, value = next(iter(bad.items()))
    with pytest.raises(ValueError, match=rf"{key}={value!r}"):
        LocalBackend(**bad)


def test_console_stop_gives_a_slow_rank_time_to_write_its_cancelled_event(rank_program, tmp_path):
    """``lanenb train``'s Ctrl-C path (``mpirun.stop``) follows the same one-signal rule."""
    import threading

    from lanenb.launch.mpirun import iter_output, launch_env, start_local, stop

    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    proc = start_local(2, ["1000", "0.1", str(pid_dir), "slowstop"], program=[str(rank_program)],
                       env=launch_env(extra={"LANE_RUN_DIR": str(tmp_path)}))
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter_output(proc.stdout)), daemon=True)
    reader.start()
    wait_for(lambda: sum(1 for ln in list(lines) if ln.event is not None and ln.event.kind == "step") >= 2,
              what="both ranks stepping")
    stop(proc, grace=6.0)
    reader.join(timeout=30)
    ends = {ln.rank: ln.event.get("status") for ln in lines if ln.event is not None and ln.event.kind == "end"}
    assert ends == {0: "cancelled", 1: "cancelled"}, [ln.text for ln in lines][-10:]
    assert sorted(ln.text for ln in lines if "got signal" in ln.text) == ["rank 0 got signal 15",
                                                                         "rank 1 got signal 15"]


# ---------------------------------------------------------------- issue 31, finding 2: cancel never hits a stranger
def _stranger(tmp_path: Path, name: str = "stranger"):
    """A process that is not the job's, leading a process group of its own, as a kernel or a shell
    that got the job's old pgid after a reboot or a pod restart would be."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                            stdin=subprocess.DEVNULL, cwd=str(tmp_path))
    wait_for(lambda: alive(proc.pid), what=f"the {name} to start")
    return proc


def test_cancel_of_a_lost_job_leaves_a_process_that_reused_its_group_alone(tiny_job, tmp_path):
    job = tiny_job(steps=2, delay=60.0, grace=1.0)
    ranks = _started_ranks(job, tiny_job.pid_dir)
    os.kill(job.handle["pid"], signal.SIGKILL)  # the machine "reboots": the whole job dies
    wait_for(lambda: not any(alive(p) for p in ranks), timeout=20, what="the job's ranks to die")
    job.backend._supervisor(job.handle)  # reaps our own child
    assert job.wait(timeout=10).state is JobState.LOST
    stranger = _stranger(tmp_path)
    try:
        # its group number is now the stranger's (simulated: the handle points at the stranger's group,
        # and its pid at the stranger too, whose start time is not the recorded one)
        handle = {**job.handle, "pgid": stranger.pid, "pid": stranger.pid}
        JobRegistry().update(job.name, handle=handle)
        status = get_job(job.name).cancel()
        assert status.state is JobState.LOST
        time.sleep(0.5)
        assert stranger.poll() is None and alive(stranger.pid), "cancel of a lost job killed a stranger"
        said = [ln.text for ln in get_job(job.name).logs() if ln.source == "supervisor"]
        assert any(f"pid {stranger.pid}" in t and "were not signalled" in t for t in said), said
    finally:
        stranger.kill()
        stranger.wait()


def test_cancel_still_stops_every_rank_that_carries_the_jobs_marker(tiny_job):
    """The proof works for the job's own processes: a running job is stopped whole, and each of
    its ranks carries the job's marker."""
    job = tiny_job(steps=1000, delay=0.1, grace=1.0)
    ranks = _started_ranks(job, tiny_job.pid_dir)
    marker = job.handle["marker"]
    assert marker and all(psutil.Process(p).environ().get("LANENB_JOB_MARKER") == marker for p in ranks)
    assert job.cancel().state is JobState.CANCELLED
    wait_for(lambda: not any(alive(p) for p in ranks), timeout=20, what="the ranks to stop")


def test_a_lost_jobs_reason_skips_pythons_warnings_and_a_killed_mpirun_says_so(tmp_path):
    """Issue 51: every `lost` reason quoted runpy's harmless RuntimeWarning as "its last error
    output"; "launcher exited with code -9" did not say mpirun itself was killed."""
    import json as _json

    from lanenb.backends.local.backend import LocalBackend
    from lanenb.jobs import TrainSpec

    run = tmp_path / "run"
    run.mkdir()
    (run / "job.log").write_text("")
    (run / "supervisor.err").write_text(
        "OSError: [Errno 28] No space left on device\n"
        "<frozen runpy>:128: RuntimeWarning: 'lanenb.backends.local.supervise' found in sys.modules after import "
        "of package 'lanenb.backends.local', but prior to execution of 'lanenb.backends.local.supervise'; this may "
        "result in unpredictable behaviour\n")
    handle = {"pid": 2 ** 22 - 7, "create_time": 1.0, "run_dir": str(run), "log": str(run / "job.log"), "marker": "m"}
    spec = TrainSpec(dataset=str(tmp_path), processes=1)
    reason = LocalBackend().status(spec, handle).reason
    assert "its last error output: OSError: [Errno 28] No space left on device" in reason and "runpy" not in reason
    (run / "exit.json").write_text(_json.dumps({"returncode": -9, "started": 1.0, "finished": 2.0}))
    assert "launcher exited with code -9 (mpirun was killed by SIGKILL)" in LocalBackend().status(spec, handle).reason


def test_a_handle_without_a_start_time_never_takes_a_strangers_pid_for_its_supervisor():
    """Issue 43 (low): a recorded pid with no start time matched whatever process held that pid
    now; without a start time only the job's marker proves the process is the job's."""
    from lanenb.backends.local.backend import LocalBackend

    me = {"pid": os.getpid(), "create_time": None, "marker": "not-this-process", "run_dir": "/nonexistent"}
    assert LocalBackend()._supervisor(me) is None  # this very process: alive, but not the job's
