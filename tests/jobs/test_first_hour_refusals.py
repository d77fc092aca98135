"""What a new user's first hour tripped on, refused before anything starts, with the fix in one
line: more ranks than this machine runs (``-np 999`` on a laptop), a ``--data`` folder that is not
a dataset (one level too high), and the same refusals on resume and the doctor's Apply."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from lanenb.cli import main
from lanenb.contract.validate import validate
from lanenb.jobs import JobState, SpecError, TrainSpec, get_job, list_jobs, submit
from lanenb.server.api import apply_change

CORES = len(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    """``data/synth`` under a ``data`` folder, as the docs make it."""
    from lanenb_trainer.data.synth import synthesize

    root = tmp_path_factory.mktemp("first-hour") / "data"
    synthesize(root / "synth", 8, seed=0, width=256, height=144, test_fraction=0.25, progress=False)
    return root / "synth"


def test_more_ranks_than_cores_is_refused_with_the_fix_in_one_line(synth):
    (problem,) = validate(TrainSpec(dataset=str(synth), processes=999))
    assert problem.field == "processes"
    assert str(problem) == (f"processes=999: more ranks than this machine runs ({CORES} CPU core(s)); use -np <= "
                            f"{CORES} here (processes={CORES}), or --oversubscribe (local={{'oversubscribe': True}}), "
                            f"or --backend kubernetes")
    assert validate(TrainSpec(dataset=str(synth), processes=CORES)) == []
    assert validate(TrainSpec(dataset=str(synth), processes=999, local={"oversubscribe": True})) == []
    with pytest.raises(SpecError, match=r"local.oversubscribe='maybe'"):
        TrainSpec(dataset=str(synth), local={"oversubscribe": "maybe"})
    with pytest.raises(SpecError, match=r"more ranks than this machine runs"):
        submit(TrainSpec(dataset=str(synth), processes=999))
    assert list_jobs() == []  # nothing recorded, nothing started


def test_the_cli_dry_run_reports_it_and_oversubscribe_lets_it_through(synth, capsys):
    assert main(["train", "--data", str(synth), "--processes", "999", "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert (f"problem: --processes 999: more ranks than this machine runs ({CORES} CPU core(s)); "
            f"use -np <= {CORES}") in out
    assert "mpirun argv" not in out
    assert main(["train", "--data", str(synth), "-np", "999", "--oversubscribe", "--dry-run"]) == 0
    assert "mpirun argv: " in capsys.readouterr().out


def test_a_folder_above_the_dataset_names_the_dataset_below_it(synth, capsys):
    parent = synth.parent  # --data data, where the frames are in data/synth
    (problem,) = validate(TrainSpec(dataset=str(parent), processes=1))
    assert problem.field == "dataset"
    assert str(problem) == (f"dataset={str(parent)!r}: not a TuSimple dataset (no label_data*.json training labels "
                            f"in it); did you mean {str(synth)!r}?")
    empty = parent.parent / "empty"
    empty.mkdir(exist_ok=True)
    (problem,) = validate(TrainSpec(dataset=str(empty), processes=1))
    assert "make one with 'lanenb data synth --out data/synth'" in str(problem)
    assert main(["train", "--data", str(parent), "-np", "1", "--dry-run"]) == 1
    assert f"problem: --data {parent}: not a TuSimple dataset" in (out := capsys.readouterr().out)
    assert f"did you mean {str(synth)!r}?" in out
    assert list_jobs() == []


def test_the_magic_refuses_it_in_the_words_the_user_typed(synth, ip_shell):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match=rf"^--processes 999: more ranks than this machine runs \({CORES} CPU"):
        ip_shell.run_line_magic("lanetrain", f"--data {synth} --processes 999")
    assert list_jobs() == []


PROGRAM = "import time, sys; print('working', flush=True); time.sleep(60)\n"


def test_resume_and_apply_refuse_ranks_the_machine_cannot_run_before_anything_stops(tmp_path):
    program = tmp_path / "work.py"
    program.write_text(PROGRAM)
    spec = TrainSpec(dataset=str(tmp_path), processes=1, run_dir=str(tmp_path / "run"))
    job = submit(spec, program=[sys.executable, str(program)], trainer_args=False, grace=2.0)
    try:
        for line in job.logs(follow=True):
            if line.text == "working":
                break
        with pytest.raises(SpecError, match=r"processes=50000: more ranks than this machine runs"):
            apply_change(job.name, "processes", 50000)
        assert get_job(job.name).status().state is JobState.RUNNING  # refused while it still ran
        job.suspend()
        with pytest.raises(SpecError, match=r"processes=50000: more ranks than this machine runs"):
            get_job(job.name).resume(processes=50000)
        assert get_job(job.name).status().state is JobState.SUSPENDED  # a refused resume changes nothing
    finally:
        job.cancel()


@pytest.fixture
def ip_shell():
    from ipshell import session_shell

    return session_shell()
