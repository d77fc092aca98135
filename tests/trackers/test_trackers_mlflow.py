"""``lanenb.trackers.to_mlflow`` against a real MLflow tracking store (SQLite), read back with MlflowClient."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("sqlalchemy")
pytest.importorskip("alembic")
from mlflow.tracking import MlflowClient

from lanenb.trackers import AlreadyExportedError, NotFinishedError, to_mlflow
from lanenb_trainer.events import PREFIX, parse_line

pytestmark = pytest.mark.slow  # one real 2-rank training run per module


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[str, Path]:
    """A SQLite tracking URI and the folder where its experiments keep their files."""
    root = tmp_path_factory.mktemp("mlflow")
    return f"sqlite:///{root / 'mlflow.db'}", root / "artifacts"


def experiment(store: tuple[str, Path], name: str) -> str:
    """Create ``name`` with its files under the test's folder (MLflow's default is the cwd)."""
    uri, artifacts = store
    return MlflowClient(uri).create_experiment(name, artifact_location=(artifacts / name).as_uri())


def rank0_events(job, kind: str) -> list:
    lines = (Path(job.run_dir) / "events.jsonl").read_text().splitlines()
    return [ev for line in lines if (ev := parse_line(PREFIX + line)) is not None and ev.kind == kind]


def test_a_finished_run_is_logged_with_params_metrics_and_model(finished_job, store, tmp_path):
    uri, artifacts = store
    done = to_mlflow(finished_job, tracking_uri=uri, experiment="lanes",
                     artifact_location=(artifacts / "lanes").as_uri())
    client = MlflowClient(uri)
    run = client.get_run(done.run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == finished_job.name
    assert client.get_experiment(run.info.experiment_id).name == "lanes"

    params = run.data.params  # the trainer config as it ran, and the launch spec
    assert params["batch_size"] == "4" and params["img_height"] == "64"
    assert params["world_size"] == "2" and params["engine"] == "ddp"
    assert params["spec.processes"] == "2"

    steps = rank0_events(finished_job, "step")
    history = client.get_metric_history(done.run_id, "train/loss")
    assert [m.step for m in history] == [ev["step"] for ev in steps]
    assert [m.value for m in history] == pytest.approx([ev["loss"] for ev in steps], rel=1e-9)
    val = client.get_metric_history(done.run_id, "val/accuracy")
    assert len(val) == 2  # one per epoch

    metrics = json.loads((Path(finished_job.run_dir) / "metrics.json").read_text())
    assert run.data.metrics["accuracy"] == pytest.approx(metrics["accuracy"])
    assert run.data.metrics["test/accuracy"] == pytest.approx(metrics["test"]["accuracy"])
    assert run.data.tags["lanenb.headline_model"] == metrics["headline"]["label"]  # e.g. "best.pt, epoch 1"
    assert run.data.tags["lanenb.job"] == finished_job.name

    listed = {f.path: f.file_size for f in client.list_artifacts(done.run_id, "checkpoints")}
    ckpt = Path(finished_job.run_dir) / "checkpoints" / "best.pt"
    assert listed == {"checkpoints/best.pt": ckpt.stat().st_size}
    fetched = client.download_artifacts(done.run_id, "checkpoints/best.pt", str(tmp_path))
    assert Path(fetched).read_bytes() == ckpt.read_bytes()
    assert {f.path for f in client.list_artifacts(done.run_id)} >= {"metrics.json", "config.json", "checkpoints"}


def test_a_second_export_is_refused_unless_asked_again(finished_job, store):
    uri, _ = store
    experiment(store, "twice")
    first = to_mlflow(finished_job.name, tracking_uri=uri, experiment="twice")  # a job name works too
    with pytest.raises(AlreadyExportedError, match=f"already in MLflow experiment 'twice' as run {first.run_id}"):
        to_mlflow(finished_job, tracking_uri=uri, experiment="twice")
    again = to_mlflow(finished_job, tracking_uri=uri, experiment="twice", again=True)
    assert again.run_id != first.run_id


def test_a_running_job_is_refused(home, synth, tmp_path, store):
    from lanenb.jobs import TrainSpec, submit

    job = submit(TrainSpec(dataset=str(synth), processes=1, engine="ddp", epochs=50, use_val=False,
                           run_dir=str(tmp_path / "run"), extra_args=["--img-height", "64", "--img-width", "160"]))
    try:
        with pytest.raises(NotFinishedError, match=rf"job '{job.name}' is (running|pending): only a finished run"):
            to_mlflow(job, tracking_uri=store[0], experiment="never")
    finally:
        job.cancel()
    assert MlflowClient(store[0]).get_experiment_by_name("never") is None  # nothing was written


def test_the_cli_and_the_magic_export_the_same_way(finished_job, store, capsys):
    from ipshell import session_shell

    from lanenb.cli import main

    uri, _ = store
    experiment(store, "cli")
    assert main(["jobs", "to-mlflow", finished_job.name, "--tracking-uri", uri, "--experiment", "cli"]) == 0
    out = capsys.readouterr().out
    assert f"{finished_job.name} -> MLflow run " in out
    assert main(["jobs", "to-mlflow", finished_job.name, "--tracking-uri", uri, "--experiment", "cli"]) == 2
    assert "already in MLflow experiment 'cli'" in capsys.readouterr().err

    experiment(store, "magic")
    ip = session_shell()
    ip.user_ns["job"] = finished_job
    ip.run_line_magic("lanemlflow", f"job --tracking-uri {uri} --experiment magic")
    assert f"{finished_job.name} -> MLflow run " in capsys.readouterr().out
    runs = MlflowClient(uri).search_runs([MlflowClient(uri).get_experiment_by_name("magic").experiment_id])
    assert [r.data.tags["lanenb.job"] for r in runs] == [finished_job.name]


def test_without_events_jsonl_the_record_comes_from_the_jobs_log(finished_job):
    """What a Kubernetes job whose run dir is not here goes through: rank 0's events read from
    the job's log give the same series as its events.jsonl."""
    from lanenb.trackers import run_record

    events = Path(finished_job.run_dir) / "events.jsonl"
    from_file = run_record(finished_job)
    hidden = events.with_name("events.jsonl.hidden")
    events.rename(hidden)
    try:
        from_log = run_record(finished_job)
    finally:
        hidden.rename(events)
    assert from_file.source == str(events) and "log" in from_log.source
    series = [(m.key, m.step, m.value) for m in from_file.metrics]
    assert series and [(m.key, m.step, m.value) for m in from_log.metrics] == series
    assert from_log.params["world_size"] == "2"
