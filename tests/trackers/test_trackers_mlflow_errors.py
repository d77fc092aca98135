"""Bad input to the MLflow export is refused with the value named, before MLflow is touched."""

from __future__ import annotations

import pytest

from lanenb.errors import UserError
from lanenb.jobs import JobNotFoundError
from lanenb.registry.jobs import JobRegistry
from lanenb.trackers import to_mlflow


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    registry = JobRegistry()
    registry.add("lane-done", "local", {"dataset": str(tmp_path)}, str(tmp_path / "run"))
    registry.update("lane-done", state="succeeded", status={"state": "succeeded"})
    return registry


@pytest.mark.parametrize("run, kwargs, error, words", [
    ("no-such-job", {}, JobNotFoundError, "no-such-job"),
    (None, {}, UserError, "run=None: expected a Job or a job name"),
    ("lane-done", {"experiment": " "}, UserError, "experiment=' ': must be a non-empty name"),
])
def test_bad_input_is_named(registry, tmp_path, run, kwargs, error, words):
    uri = f"sqlite:///{tmp_path / 'never.db'}"
    with pytest.raises(error, match=words):
        to_mlflow(run, tracking_uri=uri, **kwargs)
    assert not (tmp_path / "never.db").exists()


def test_the_magic_and_the_cli_say_it_in_one_line(registry, capsys):
    from ipshell import session_shell
    from IPython.core.error import UsageError

    from lanenb.cli import main

    ip = session_shell()
    with pytest.raises(UsageError, match="no job named 'no-such-job'"):
        ip.run_line_magic("lanemlflow", "no-such-job --tracking-uri sqlite:///x.db")
    assert "%lanemlflow" in ip.magics_manager.magics["line"]["lanemlflow"].__doc__  # %lanemlflow? shows the flags
    assert main(["jobs", "to-mlflow", "no-such-job"]) == 2
    assert "no-such-job" in capsys.readouterr().err
