"""``lanenb train`` validates before starting any rank."""

from __future__ import annotations

import pytest

from lanenb.cli import main


@pytest.mark.parametrize("argv,expected", [
    (["--data", "/no/such/data"], "--data '/no/such/data': no such directory"),
    (["--processes", "0"], "--processes 0: must be >= 1"),
    (["--batch-size", "0"], "--batch-size 0: must be >= 1"),
])
def test_train_rejects_bad_input_before_launch(argv, expected, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if "--data" not in argv:
        (tmp_path / "d").mkdir()
        argv = ["--data", "d", *argv]
    assert main(["train", *argv]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert not (tmp_path / "runs").exists()  # nothing started, nothing written


def test_env_var_error_names_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("USE_VAL", "sometimes")
    assert main(["train", "--data", str(tmp_path)]) == 2
    assert "environment variable USE_VAL='sometimes': must be true or false" in capsys.readouterr().err


@pytest.mark.parametrize("argv,expected", [
    (["--frames", "5"], "--frames must be >= 20, got 5"),
    (["--processes", "0"], "--processes must be >= 1, got 0"),
])
def test_demo_rejects_bad_input(argv, expected, tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo"), *argv]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


def test_console_renderer_formats_events_and_plain_lines():
    import io

    from lanenb.cli.train import ConsoleRenderer
    from lanenb.launch.mpirun import TaggedOutputParser
    from lanenb_trainer.events import format_event

    out = io.StringIO()
    r = ConsoleRenderer(out)
    p = TaggedOutputParser()
    for raw in [
        "[1,0]<stdout>:" + format_event("step", 0, epoch=1, step=7, total_steps=20, loss=0.5, lr=0.01,
                                          images_per_s=12.5) + "\n",
        "[1,1]<stderr>:some warning\n",
        "[1,1]<stdout>:" + format_event("error", 1, type="RuntimeError", message="boom",
                                          traceback="Traceback ...\nRuntimeError: boom") + "\n",
        "[1,0]<stdout>:" + format_event("system", 0, cpu_percent=99.0, rss_mb=300.0) + "\n",
        "[1,0]<stdout>:" + format_event("end", 0, status="failed", duration_s=3.0, step=7) + "\n",
    ]:
        for line in p.feed(raw):
            r(line)
    text = out.getvalue()
    assert "[0] epoch 2 step 7/20 loss 0.5000 lr 1.00e-02 12.5 img/s" in text  # epoch index 1: the 2nd
    assert "[1] some warning" in text
    assert "[1] ERROR RuntimeError: boom\nTraceback ..." in text
    assert "system" not in text  # hidden unless --show-system
    assert "[0] end: failed after 3.0s, step 7" in text
    assert r.end_status == "failed" and len(r.errors) == 1


@pytest.mark.slow
def test_demo_end_to_end_as_the_readme_runs_it(tmp_path):
    """The README's main command: synth -> check -> preview -> 2-rank training -> eval -> images."""
    import json
    import subprocess
    import sys

    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "lanenb", "demo", "--out", str(out), "--frames", "40",
                           "--epochs", "1", "--engine", "ddp"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for step in ("1/5 data", "2/5 check: no problems", "3/5 preview", "4/5 train: 2 ranks", "5/5 test set"):
        assert step in proc.stdout
    metrics = json.loads((out / "run" / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["world_size"] == 2
    assert 0.0 <= metrics["test"]["accuracy"] <= 1.0
    for png in ("preview.png", "predictions.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_foreground_run_is_a_job_listed_like_any_other(synth_root, tmp_path, capsys):
    """``lanenb train`` in the foreground goes through the Job API: the run is in ``jobs list``
    (and so in ``%lanejobs`` and the sidebar) with its state and metrics."""
    import json

    from trainer_support import train_args

    from lanenb.jobs import list_jobs

    args = train_args(synth_root, tmp_path / "run", engine="ddp", epochs=1, max_steps=2)
    assert main(["train", "--processes", "2", "--name", "fg-run", *args]) == 0
    out = capsys.readouterr().out
    assert "fg-run: run dir" in out and "done: metrics in" in out
    [job] = [j for j in list_jobs() if j.name == "fg-run"]
    assert job.status().state.value == "succeeded"
    assert job.run_dir == str(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["world_size"] == 2
    capsys.readouterr()
    assert main(["jobs", "list"]) == 0
    assert "fg-run" in capsys.readouterr().out
