"""``lanenb train --dry-run / --wait / --timeout``: the flags ``%lanetrain`` takes, with the same
meaning on the console (``--wait`` waits quietly and prints the final state)."""

from __future__ import annotations

import pytest
from notebook_support import training_script

from lanenb.cli import main
from lanenb.jobs import JobState, get_job, list_jobs

RUNAI_LINE = ('--dry-run --backend kubernetes --data /mnt/tusimple --name dist-lane-detection-training --large-shm '
              '--processes=3 --gpu 1 --pvc pvc-download-tusimple-data-0:/mnt --image registry.example.com/t:1 '
              '-e USE_WORKERS=true -e NUM_WORKERS=4 -e BATCH_SIZE=33 -e USE_VAL=false')


def test_dry_run_prints_what_lanetrain_prints_and_starts_nothing(ip, capsys):
    assert ip.run_line_magic("lanetrain", RUNAI_LINE) is None
    magic_out = capsys.readouterr().out
    assert main(["train", *RUNAI_LINE.split()]) == 0
    cli_out = capsys.readouterr().out
    assert cli_out == magic_out and "kind: MPIJob" in cli_out
    assert "3 process(es) x 1 GPU(s), batch 33 per rank = global batch 99" in cli_out
    assert list_jobs() == []


def test_dry_run_local_prints_the_mpirun_argv(tmp_path, capsys):
    (tmp_path / "label_data_0313.json").write_text("")  # a dataset root, as far as a launch checks
    assert main(["train", "--dry-run", "--data", str(tmp_path), "--processes", "2", "--run-dir", "runs/x"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("spec: 2 process(es)") and "mpirun argv: " in out and " -np 2 " in out and "runs/x" in out
    assert list_jobs() == [] and not (tmp_path / "runs").exists()


def test_wait_submits_waits_quietly_and_prints_the_final_state(scripted, capsys):
    spec = scripted(training_script(steps=3, sleep=0.05), "quick")
    code = main(["train", "--backend", "scripted", "--data", spec["dataset"], "--name", "lane-cli", "--wait"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[0].startswith("submitted lane-cli (scripted)")
    assert out.splitlines()[-1].startswith("lane-cli: succeeded")
    assert "plain output of rank" not in out  # quiet: the log is not streamed
    assert get_job("lane-cli").status().state == JobState.SUCCEEDED


def test_wait_timeout_leaves_the_job_running(scripted, capsys):
    spec = scripted(training_script(steps=200, sleep=0.2), "slow")
    code = main(["train", "--backend", "scripted", "--data", spec["dataset"], "--name", "lane-slow",
                 "--wait", "--timeout", "0.5"])
    err = capsys.readouterr().err
    assert code == 124 and "still running after 0.5 s" in err and "lanenb jobs wait lane-slow" in err
    job = get_job("lane-slow")
    assert not job.status().state.finished
    assert job.cancel().state == JobState.CANCELLED


@pytest.mark.parametrize("argv,message", [
    (["--timeout", "5"], "--timeout 5 applies only with --wait"),
    (["--wait", "--dry-run"], "--wait and --dry-run exclude each other"),
    (["--wait", "--detach"], "--detach and --wait exclude each other"),
    (["--dry-run", "--detach"], "--detach and --dry-run exclude each other"),
])
def test_run_flag_mistakes_are_one_line(tmp_path, capsys, argv, message):
    assert main(["train", "--data", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err
    assert list_jobs() == []


def test_every_help_description_is_a_whole_sentence_for_users():
    """``lanenb --help`` once printed a docstring's cut first line ("... and registers")."""
    import argparse

    from lanenb.cli import build_parser

    def parsers(parser: argparse.ArgumentParser, path: str):
        yield path, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from parsers(sub, f"{path} {name}")

    seen = 0
    for path, parser in parsers(build_parser(), "lanenb"):
        if parser.description is None:
            continue
        seen += 1
        text = parser.description
        assert text.endswith("."), (path, text)
        assert "``" not in text and "registers" not in text, (path, text)
    assert seen >= 8
    assert build_parser().description.startswith("Train SCNN lane detection on N MPI ranks")
