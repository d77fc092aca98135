"""``max_restarts``: the local supervisor starts the ranks again after a preemption or a killed
rank, never after an error or a cancel; a job that stays preempted is ``preempted``, not failed.

The restart rules run a tiny MPI program under the real mpirun and supervisor (seconds); one
test runs the real trainer through a SIGTERM and a SIGKILL and reads what every view says.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from lanenb.analysis.runstate import RunState
from lanenb.analysis.summary import job_summary
from lanenb.cli.train import ConsoleRenderer
from lanenb.commands.arguments import add_job_arguments, spec_from_args
from lanenb.errors import SpecError
from lanenb.jobs import JobState, TrainSpec, get_job, submit
from lanenb_trainer import exitcodes

# Each rank counts its own starts in the run dir; "once" modes misbehave on the first start only.
PROGRAM = textwrap.dedent(
    """
    import os, signal, sys, time
    rank, mode = int(os.environ["OMPI_COMM_WORLD_RANK"]), sys.argv[1]
    starts = os.path.join(os.environ["LANE_RUN_DIR"], f"starts-{rank}")
    with open(starts, "a") as fh:
        fh.write("x")
    n = os.path.getsize(starts)
    print(f"rank {rank} start {n}", flush=True)
    time.sleep(0.3)
    if mode == "preempt-always" or (mode == "preempt-once" and n == 1):
        sys.exit(75)  # what every rank does after its preemption checkpoint
    if mode == "killed-once" and n == 1 and rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "fail":
        sys.exit(1)
    if mode == "slow":
        time.sleep(60)
    print(f"rank {rank} done on start {n}", flush=True)
    """
)


@pytest.fixture
def restart_job(tmp_path: Path):
    program = tmp_path / "restart_program.py"
    program.write_text(PROGRAM)

    def _submit(mode: str, max_restarts: int):
        run_dir = tmp_path / f"run-{mode}"
        spec = TrainSpec(dataset=str(tmp_path), processes=2, run_dir=str(run_dir), max_restarts=max_restarts,
                         env={"LANE_RUN_DIR": str(run_dir)})
        return submit(spec, program=[sys.executable, str(program), mode], trainer_args=False, grace=2.0)
    return _submit


def _exit_info(job) -> dict:
    return json.loads((Path(job.run_dir) / "exit.json").read_text())


def test_a_preempted_job_starts_again_and_succeeds(restart_job):
    job = restart_job("preempt-once", max_restarts=1)
    assert job.wait(timeout=60).state is JobState.SUCCEEDED
    assert [(r["returncode"], r["why"]) for r in _exit_info(job)["restarts"]] == [(75, "preempted")]
    texts = [line.text for line in job.logs()]
    assert "preempted: restart 1 of 1, continuing from the run's last checkpoint" in texts
    assert sorted(t for t in texts if "done" in t) == ["rank 0 done on start 2", "rank 1 done on start 2"]


def test_a_job_preempted_with_no_restart_left_is_preempted_not_failed(restart_job):
    job = restart_job("preempt-always", max_restarts=1)
    status = job.wait(timeout=60)
    assert status.state is JobState.PREEMPTED and status.state.finished and status.exit_code == exitcodes.PREEMPTED
    assert "SIGTERM stopped every rank" in status.reason and "after 1 restart " in status.reason
    assert get_job(job.name).status().state is JobState.PREEMPTED  # recorded as such, final


@pytest.mark.parametrize("mode,state,restarts", [
    ("killed-once", JobState.SUCCEEDED, [137]),  # mpirun: 128 + SIGKILL
    ("fail", JobState.FAILED, []),  # an error would only happen again
])
def test_a_killed_rank_is_restarted_and_an_error_is_not(restart_job, mode, state, restarts):
    job = restart_job(mode, max_restarts=3)
    assert job.wait(timeout=60).state is state
    assert [r["returncode"] for r in _exit_info(job)["restarts"]] == restarts


def test_a_cancelled_job_is_never_restarted(restart_job):
    job = restart_job("slow", max_restarts=3)
    for line in job.logs(follow=True):
        if line.text == "rank 1 start 1":
            break
    assert job.cancel().state is JobState.CANCELLED
    assert _exit_info(job)["restarts"] == []


def test_max_restarts_is_a_count(tmp_path):
    with pytest.raises(SpecError, match=r"max_restarts=-1: must be >= 0"):
        TrainSpec(dataset=str(tmp_path), max_restarts=-1)
    parser = add_job_arguments(argparse.ArgumentParser())
    spec = spec_from_args(parser.parse_args(["--data", str(tmp_path), "--max-restarts", "2"]), parser)
    assert spec.max_restarts == 2 and spec.trainer_args("/r")[-2:] == ["--run-id", spec.name]


@pytest.mark.slow
def test_a_training_job_survives_a_preemption_and_a_killed_rank_and_every_view_says_what_it_cost(synth_root, tmp_path):
    spec = TrainSpec(dataset=str(synth_root), processes=2, engine="ddp", batch_size=4, epochs=2, max_restarts=2,
                     use_val=False,
                     run_dir=str(tmp_path / "run"), env={"LANENB_THREADS": "1"},
                     extra_args=["--img-height", "64", "--img-width", "160", "--log-every", "1", "--warmup-steps", "2",
                                 "--lr", "0.02", "--system-interval", "5"])
    job = submit(spec)
    pids: dict[int, int] = {}
    starts = 0
    for ev in job.events(follow=True):
        if ev.kind == "start":
            pids[ev.rank] = ev["pid"]
            starts += ev.rank == 0
        elif ev.kind == "step" and (starts, ev["step"]) == (1, 2):
            os.kill(pids[1], signal.SIGTERM)  # a preemption: rank 1 only; both checkpoint
        elif ev.kind == "step" and (starts, ev["step"]) == (2, 7):
            os.kill(pids[0], signal.SIGKILL)  # a lost rank: the steps since the epoch's checkpoint are taken again
    status = job.wait(timeout=120)
    assert status.state is JobState.SUCCEEDED, status
    assert [r["why"] for r in _exit_info(job)["restarts"]] == ["preempted", "a process was killed (exit 137)"]
    first, second = [ev for ev in job.events() if ev.kind == "resumed"]
    assert (first["count"], first["steps_lost"], first["preempted"]) == (1, 0, True)
    assert (second["count"], second["step"], second["preempted"]) == (2, 4, False)  # the 2nd epoch's checkpoint
    lost = second["steps_lost_total"]
    assert lost == second["reached"] - 4 >= 3
    state = RunState()
    for update in job.poll(None).updates:
        state.apply(update)
    said = f"resumed 2x, {lost} steps lost"
    assert state.summary().endswith(said) and job_summary(job, state)["summary"] == state.summary()
    out = io.StringIO()
    renderer = ConsoleRenderer(out)
    for line in job.logs():
        renderer(line)
    console = out.getvalue()
    assert "preempted: SIGTERM to rank 1; every rank stopped at step" in console
    assert f"resumed (2x) after an interruption from step 4 (epoch 2): {lost} steps lost" in console
