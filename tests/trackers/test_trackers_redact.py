"""Issue 31, finding 10: credentials inside values (a tracking URI or a database URL with a
password, a presigned URL in the trainer's flags) never become MLflow params in clear."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from homes import isolated_home

from lanenb.contract.redact import REDACTED
from lanenb.jobs import JobState, TrainSpec, submit
from lanenb.trackers.record import run_record

PASSWORDS = ("db-pa55word", "mlfl0w-pass", "0123456789abcdef0123")


def test_mlflow_params_hold_no_credential_found_inside_a_value(tmp_path, monkeypatch):
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    isolated_home(tmp_path, monkeypatch)
    env = {"DATABASE_URL": f"postgres://app:{PASSWORDS[0]}@db:5432/lanes",
           "MLFLOW_TRACKING_URI": f"https://me:{PASSWORDS[1]}@mlflow.example.com", "LANE_NOTE": "kept"}
    presigned = f"https://b.s3.amazonaws.com/w.pt?X-Amz-Signature={PASSWORDS[2]}"
    # the trainer's resolved config (config.json) becomes params too: here with a presigned URL in it
    write_config = f"import json; json.dump({{'init_from': {presigned!r}, 'epochs': 1}}, open('config.json', 'w'))"
    spec = TrainSpec(dataset=str(tmp_path), processes=1, run_dir=str(tmp_path / "run"), env=env)
    job = submit(spec, program=[sys.executable, "-c", write_config], trainer_args=False)
    assert job.wait(timeout=60).state is JobState.SUCCEEDED
    params = run_record(job).params
    text = json.dumps(params)
    assert not any(p in text for p in PASSWORDS), params
    assert json.loads(params["spec.env"]) == {"DATABASE_URL": f"postgres://app:{REDACTED}@db:5432/lanes",
                                              "MLFLOW_TRACKING_URI": f"https://me:{REDACTED}@mlflow.example.com",
                                              "LANE_NOTE": "kept"}
    assert params["init_from"] == f"https://b.s3.amazonaws.com/w.pt?X-Amz-Signature={REDACTED}"
    # and the config.json artifact the tracking server keeps (issue 43): uploaded redacted
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow.tracking import MlflowClient

    from lanenb.trackers import to_mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = to_mlflow(job, tracking_uri=uri, experiment="redacted",
                     artifact_location=(tmp_path / "artifacts").as_uri())
    local = MlflowClient(uri).download_artifacts(done.run_id, "config.json", str(tmp_path / "down"))
    uploaded = Path(local).read_text()
    assert PASSWORDS[2] not in uploaded and REDACTED in uploaded
    assert PASSWORDS[2] in (tmp_path / "run" / "config.json").read_text()  # the run dir keeps what ran
