"""``Job.suspend()`` / ``Job.resume(**changes)`` on the local backend: the ranks stop as a
preemption stops them (a checkpoint at a step boundary), no process is left, the job reads
SUSPENDED and a ``Job`` rebuilt from the registry continues it, optionally with other loader
workers. The rules run a tiny MPI program (seconds); one test runs the real trainer.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from lanenb.jobs import JobState, JobStateError, SpecError, TrainSpec, get_job, submit

# every rank writes its pid, then works until stopped; a SIGTERM kills it (rc 143: restartable)
PROGRAM = textwrap.dedent(
    """
    import os, sys, time
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    with open(os.path.join(os.environ["LANE_RUN_DIR"], f"pid-{rank}"), "w") as fh:
        fh.write(str(os.getpid()))
    print(f"rank {rank} working", flush=True)
    time.sleep(60)
    """
)


@pytest.fixture
def working_job(tmp_path: Path):
    program = tmp_path / "work.py"
    program.write_text(PROGRAM)
    run_dir = tmp_path / "run"
    spec = TrainSpec(dataset=str(tmp_path), processes=2, run_dir=str(run_dir), max_restarts=3,
                     env={"LANE_RUN_DIR": str(run_dir)})
    job = submit(spec, program=[sys.executable, str(program)], trainer_args=False, grace=2.0)
    for line in job.logs(follow=True):
        if line.text == "rank 1 working":
            break
    return job


def _rank_pids(run_dir: Path) -> list[int]:
    return [int(p.read_text()) for p in sorted(run_dir.glob("pid-*"))]


def test_a_suspended_job_keeps_no_process_and_is_never_restarted(working_job):
    pids = _rank_pids(Path(working_job.run_dir))
    assert len(pids) == 2
    status = working_job.suspend()
    assert status.state is JobState.SUSPENDED and "suspended by user" in status.reason
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    assert working_job.backend._group_processes(working_job.handle) == []
    exit_info = json.loads((Path(working_job.run_dir) / "exit.json").read_text())
    assert exit_info["restarts"] == []  # max_restarts=3, yet a person's suspend is not restarted
    again = get_job(working_job.name)  # every reader, every view: suspended, not failed or final
    assert again.status().state is JobState.SUSPENDED and not again.status().state.finished
    assert again.wait(timeout=5).state is JobState.SUSPENDED  # wait() returns: nothing more happens by itself


def test_bad_resumes_are_refused_naming_the_value(working_job):
    with pytest.raises(JobStateError, match=r"is running: only a suspended or preempted job can be resumed"):
        working_job.resume()
    working_job.suspend()
    job = get_job(working_job.name)
    with pytest.raises(SpecError, match=r"num_workers=-1"):
        job.resume(num_workers=-1)
    with pytest.raises(SpecError, match=r"learning_rate=0.1: not a TrainSpec setting"):
        job.resume(learning_rate=0.1)
    with pytest.raises(SpecError, match=r"batch_size=8: the local backend cannot change it on resume"):
        job.resume(batch_size=8)
    with pytest.raises(SpecError, match=r"processes=0"):
        job.resume(processes=0)
    with pytest.raises(JobStateError, match=r"from_checkpoint=False"):
        job.resume(from_checkpoint=False)
    assert get_job(job.name).status().state is JobState.SUSPENDED  # a refused resume changes nothing
    with pytest.raises(JobStateError, match=r"is suspended: only a pending or running job can be suspended"):
        job.suspend()
    assert job.cancel().state is JobState.CANCELLED  # a suspended job can still be ended for good
    with pytest.raises(JobStateError, match=r"is cancelled"):
        job.resume()


@pytest.mark.slow
def test_a_suspended_training_run_resumes_from_a_new_job_object_with_more_workers_and_loses_no_step(
        synth_root, tmp_path):
    spec = TrainSpec(dataset=str(synth_root), processes=2, engine="ddp", batch_size=4, epochs=1, use_val=False,
                     num_workers=0, run_dir=str(tmp_path / "run"), env={"LANENB_THREADS": "1"},
                     extra_args=["--img-height", "64", "--img-width", "160", "--log-every", "1",
                                 "--warmup-steps", "2", "--system-interval", "5"])
    job = submit(spec)
    pids: list[int] = []
    for ev in job.events(follow=True):
        if ev.kind == "start":
            pids.append(ev["pid"])
        elif ev.kind == "step" and ev["step"] == 2:
            break
    status = job.suspend()
    assert status.state is JobState.SUSPENDED and "every rank stopped at step" in status.reason, status
    assert not any(psutil.pid_exists(pid) for pid in pids) and job.backend._group_processes(job.handle) == []
    assert (Path(job.run_dir) / "checkpoints" / "last.pt").is_file()

    again = get_job(job.name)  # as a new kernel, or after the machine restarted, would
    assert again.resume(num_workers=1).state is JobState.RUNNING
    assert again.wait(timeout=120).state is JobState.SUCCEEDED
    events = list(again.events())
    starts = [ev for ev in events if ev.kind == "start" and ev.rank == 0]
    assert [s["config"]["use_workers"] for s in starts] == [False, True] and starts[1]["config"]["num_workers"] == 1
    resumed = [ev for ev in events if ev.kind == "resumed"]
    assert len(resumed) == 1 and resumed[0]["steps_lost"] == 0 and resumed[0]["preempted"] is True
    # a person's resume of a suspend, not a launcher's retry after a preemption (issue 51)
    assert (resumed[0]["automatic"], resumed[0]["after"]) == (False, "suspended")
    steps = [ev["step"] for ev in events if ev.kind == "step" and ev.rank == 0]
    assert steps[-1] == starts[0]["total_steps"]  # the uninterrupted run's step count, none taken twice
    assert len(steps) == len(set(steps))
    assert get_job(job.name).spec.num_workers == 1  # recorded: every later view and resume sees it


@pytest.mark.slow
def test_a_suspended_run_resumes_on_fewer_ranks_with_the_global_batch_kept(synth_root, tmp_path):
    """``job.resume(processes=1)`` of a 2-rank run: the trainer keeps the global batch by
    accumulating 2 micro-batches a step, takes the rest of the epoch once, and says so."""
    spec = TrainSpec(dataset=str(synth_root), processes=2, engine="ddp", batch_size=4, epochs=1, use_val=False,
                     run_dir=str(tmp_path / "run"), env={"LANENB_THREADS": "1"},
                     extra_args=["--img-height", "64", "--img-width", "160", "--log-every", "1",
                                 "--warmup-steps", "2", "--system-interval", "5"])
    job = submit(spec)
    for ev in job.events(follow=True):
        if ev.kind == "step" and ev["step"] == 2:
            break
    assert job.suspend().state is JobState.SUSPENDED
    assert job.resume(processes=1).state is JobState.RUNNING
    assert job.wait(timeout=120).state is JobState.SUCCEEDED
    events = list(job.events())
    starts = [ev for ev in events if ev.kind == "start" and ev.rank == 0]
    assert [s["world_size"] for s in starts] == [2, 1]
    (resumed,) = [ev for ev in events if ev.kind == "resumed"]
    assert (resumed["resized"]["from"], resumed["resized"]["to"], resumed["resized"]["accumulation"]) == (2, 1, 2)
    steps = [ev["step"] for ev in events if ev.kind == "step" and ev.rank == 0]
    assert steps[-1] == starts[0]["total_steps"] and len(steps) == len(set(steps))  # same optimizer steps, once each
    assert get_job(job.name).spec.processes == 1


@pytest.mark.slow
@pytest.mark.horovod
def test_a_stop_ends_when_the_ranks_have_checkpointed_not_at_the_end_of_the_grace(synth_root, tmp_path):
    """Horovod ranks finalize MPI through mpirun: held still for the whole grace, every stop
    used to wait it out, SIGKILL ranks that had finished and record 137. Now each rank says when
    its checkpoint and last event are out, and mpirun goes on at once."""
    pytest.importorskip("horovod.torch")
    import time

    spec = TrainSpec(dataset=str(synth_root), processes=2, engine="horovod", batch_size=4, epochs=3, use_val=False,
                     run_dir=str(tmp_path / "run"), env={"LANENB_THREADS": "1"},
                     extra_args=["--img-height", "64", "--img-width", "160", "--log-every", "1",
                                 "--system-interval", "5"])
    job = submit(spec, grace=20.0)
    for ev in job.events(follow=True):
        if ev.kind == "step" and ev["step"] == 2:
            break
    t0 = time.monotonic()
    assert job.suspend().state is JobState.SUSPENDED
    took = time.monotonic() - t0
    log = (Path(job.run_dir) / "job.log").read_text()
    assert "still running after" not in log and "outlived mpirun" not in log, log[-2000:]
    assert json.loads((Path(job.run_dir) / "exit.json").read_text())["returncode"] == 75  # the ranks' own exit
    assert took < 15.0, took  # well inside the 20 s grace (measured 2.7-5 s on 2 cores)
    assert sorted(ev["status"] for ev in job.events() if ev.kind == "end") == ["suspended", "suspended"]
    job.cancel()


def test_a_status_read_while_a_resume_relaunches_never_records_the_job_lost(working_job):
    """Issue 51: a reader between the resume's new supervisor and its registry update saw the old
    supervisor gone with no exit.json and recorded LOST for good, while the new ranks trained on
    (and cancel then stopped nothing). The race is forced here: another reader asks mid-resume."""
    working_job.suspend()
    job = get_job(working_job.name)
    launch = job.backend.resume
    seen = []

    def racing_resume(spec, handle, **kw):
        new = launch(spec, handle, **kw)  # the new supervisor runs; the row still holds the old handle
        seen.append(get_job(job.name).status())  # another kernel, the sidebar, `lanenb jobs show`
        return new

    job.backend.resume = racing_resume
    assert job.resume().state is JobState.RUNNING
    assert [s.state for s in seen] == [JobState.RESTARTING]
    again = get_job(job.name)
    assert again.status().state is JobState.RUNNING and again.handle["pid"] != working_job.handle["pid"]
    assert again.cancel().state is JobState.CANCELLED
    assert again.backend._group_processes(again.handle) == []  # the newest attempt's processes were reached


def test_the_console_suspends_and_resumes_and_refuses_in_the_flags_words(working_job, capsys):
    from lanenb.cli import main

    assert main(["jobs", "suspend", working_job.name]) == 0
    assert "suspended" in capsys.readouterr().out
    assert main(["jobs", "resume", working_job.name, "-np", "50000"]) == 2
    assert "--processes 50000: more ranks than this machine runs" in capsys.readouterr().err
    assert get_job(working_job.name).status().state is JobState.SUSPENDED
    assert main(["jobs", "resume", working_job.name]) == 0
    assert "running" in capsys.readouterr().out
    assert get_job(working_job.name).cancel().state is JobState.CANCELLED


def test_a_resume_from_a_damaged_checkpoint_is_refused_before_anything_starts(working_job):
    working_job.suspend()
    folder = Path(working_job.run_dir) / "checkpoints"
    folder.mkdir(exist_ok=True)
    (folder / "last.pt").write_bytes(b"PK\x03\x04" + b"\0" * 200)  # cut short
    with pytest.raises(JobStateError, match=r"last\.pt is damaged .*no good best\.pt beside it: nothing to resume"):
        get_job(working_job.name).resume()
    assert get_job(working_job.name).status().state is JobState.SUSPENDED  # nothing started, nothing changed
