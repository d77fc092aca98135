"""The live view's Suspend, Resume and Apply buttons on real local jobs under the real mpirun:
each shows only in the states the job accepts it in, runs off the kernel's thread and says
what happened on its message line; a suspended run shows no ETA (issue 42, item 6)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from notebook_support import training_script
from polling import wait_for

from lanenb.jobs import JobState, TrainSpec, get_job, submit

# every rank works until stopped; a SIGTERM kills it (what a suspend sends)
PROGRAM = textwrap.dedent(
    """
    import os, time
    print(f"rank {os.environ['OMPI_COMM_WORLD_RANK']} working", flush=True)
    time.sleep(60)
    """
)
SHOWN, HIDDEN = "", "none"


@pytest.fixture
def working_job(tmp_path: Path):
    program = tmp_path / "work.py"
    program.write_text(PROGRAM)
    spec = TrainSpec(dataset=str(tmp_path), processes=2, run_dir=str(tmp_path / "run"))
    job = submit(spec, program=[sys.executable, str(program)], trainer_args=False, grace=2.0)
    for line in job.logs(follow=True):
        if line.text == "rank 1 working":
            break
    yield job
    job.cancel()


def shown(button) -> bool:
    return button.layout.display != HIDDEN


def click_and_wait(view, button) -> None:
    """A click as the browser sends it; the action runs on its own thread: wait for it."""
    button.click()
    assert view.action_thread is not None
    view.action_thread.join(60)
    assert not view.action_thread.is_alive()


def test_suspend_shows_on_a_running_job_and_leaves_it_suspended_with_resume_offered(working_job):
    from lanenb.notebook import JobView

    view = JobView(working_job, refresh=0.2)
    assert wait_for(lambda: view.state.state == "running", 20)
    assert shown(view.suspend_button) and not view.suspend_button.disabled
    assert view.suspend_button.description == "Suspend"
    assert not shown(view.resume_button) and not shown(view.apply_button)  # no verdict, no change to apply
    click_and_wait(view, view.suspend_button)
    assert get_job(working_job.name).status().state is JobState.SUSPENDED
    assert f"<b>{working_job.name}</b>: suspended" in view.message.value
    assert shown(view.resume_button) and not view.resume_button.disabled
    assert view.resume_button.description == "Resume"
    assert not shown(view.suspend_button) and not shown(view.apply_button)
    assert not view.final and view.running  # suspended is not the end: the view keeps following
    assert not view.stop_button.disabled  # a suspended job can still be stopped for good
    view.close()


def test_resume_runs_the_suspended_job_again_and_offers_suspend_again(working_job):
    from lanenb.notebook import JobView

    working_job.suspend()
    view = JobView(working_job, refresh=0.2)
    assert wait_for(lambda: shown(view.resume_button), 20)
    click_and_wait(view, view.resume_button)
    assert get_job(working_job.name).status().state is JobState.RUNNING
    assert f"<b>{working_job.name}</b>: running" in view.message.value
    assert wait_for(lambda: shown(view.suspend_button) and not shown(view.resume_button), 20)
    view.close()


def test_a_failed_action_says_why_in_one_line_without_a_traceback(working_job):
    from lanenb.notebook import JobView

    view = JobView(working_job, refresh=0.2, start=False)
    assert shown(view.suspend_button)
    working_job.cancel()  # ended behind the view's back, before it polled again
    click_and_wait(view, view.suspend_button)
    assert view.message.value.startswith("<div style='color:")
    assert (f"could not suspend <b>{working_job.name}</b>: job &#x27;{working_job.name}&#x27; is cancelled: "
            f"only a pending or running job can be suspended") in view.message.value
    assert "Traceback" not in view.message.value
    assert not view.suspend_button.disabled  # the buttons are usable again after the answer


def test_a_suspended_run_shows_no_eta(scripted):
    from lanenb.notebook import JobView

    job = submit(TrainSpec(**scripted(training_script(steps=500, sleep=0.1), "eta")))
    view = JobView(job, refresh=0.2)
    assert wait_for(lambda: view.eta.value.startswith("ETA "), 30)  # counting down while it runs
    job.suspend()
    assert wait_for(lambda: "suspended" in view.title.value, 20)
    assert wait_for(lambda: "ETA" not in view.eta.value, 5), view.eta.value  # drawn with the title
    assert "ETA" not in view.title.value  # the status line: state, step, loss, no ETA
    assert "ETA" not in view._repr_mimebundle_()["text/plain"]
    view.close()
    job.cancel()


def test_apply_shows_only_with_the_doctor_s_change_and_resumes_the_run_with_it(scripted):
    from lanenb.notebook import JobView

    # every rank waits 0.3 s of each 0.4 s step for data, with 2 loader workers: input-bound
    timing = {0: {"data_s": 0.3, "compute_s": 0.1}, 1: {"data_s": 0.3, "compute_s": 0.1}}
    spec = scripted(training_script(steps=400, sleep=0.05, timing=timing), "slow-input")
    job = submit(TrainSpec(**spec, num_workers=2))
    view = JobView(job, refresh=0.2)
    assert wait_for(lambda: view.state.step >= 2, 30)
    assert wait_for(lambda: shown(view.apply_button), 30)
    change = view._change
    assert change["setting"] == "num_workers" and change["value"] > 2
    assert view.apply_button.description == f"Apply: loader workers {change['value']}"
    assert "input-bound" in view.verdict.value
    click_and_wait(view, view.apply_button)
    again = get_job(job.name)
    assert again.status().state is JobState.RUNNING and again.spec.num_workers == change["value"]
    assert f"<b>{job.name}</b>: running" in view.message.value
    view.close()
    job.cancel()
