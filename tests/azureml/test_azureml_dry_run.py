"""``lanenb train --backend azureml --dry-run`` (``%lanetrain``'s flags and report, shared code; the
magic itself in ``tests/notebook/test_magics_azureml.py``): the job YAML the Azure CLI accepts, read
back by the SDK's own schema (``load_job``) into the same command job the backend would send."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from azureml_replay import WORKSPACE

from lanenb.backends.azureml.command_job import build_command
from lanenb.cli import main
from lanenb.commands.arguments import add_job_arguments, spec_from_args
from lanenb.jobs import list_jobs

LINE = ("--backend azureml --dry-run --data azureml:tusimple:1 --compute gpu-cluster --nodes 2 -np 4 "
        "--shm-size 16g --batch-size 4 --max-steps 20 --azureml-environment lanenb-trainer:3 --name lane-az-dry "
        f"--subscription {WORKSPACE['subscription_id']} --resource-group lanes-rg --workspace lanes-ws "
        "-e HF_TOKEN=hf_secret_value -e LANE_NOTE=kept --lr 0.02")


def _yaml_of(out: str) -> str:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# AzureML command job"))
    return "\n".join(lines[start:]) + "\n"


def _plain(job) -> dict:
    return json.loads(json.dumps(job._to_dict()))


def _spec_of(line: str):
    import argparse

    parser = add_job_arguments(argparse.ArgumentParser())
    args = [a for a in line.split() if a != "--dry-run"]
    return spec_from_args(parser.parse_args(args), parser)


def test_dry_run_prints_yaml_that_load_job_reads_back_to_the_same_job(capsys, tmp_path):
    from azure.ai.ml import load_job

    assert main(["train", *LINE.split()]) == 1  # a literal secret would be refused at submit (issue 31)
    out = capsys.readouterr().out
    assert out.startswith("spec: 4 process(es) x 0 GPU(s), batch 4 per rank = global batch 16")
    assert [line for line in out.splitlines() if line.startswith("problem:")] == [
        line for line in out.splitlines() if line.startswith("problem: env=['HF_TOKEN=<redacted>']")]
    assert "problem:" in out
    text = _yaml_of(out)
    data = yaml.safe_load(text)
    assert data["distribution"] == {"type": "mpi", "process_count_per_instance": 2}
    assert data["resources"] == {"instance_count": 2, "shm_size": "16g"}
    assert data["compute"] == "azureml:gpu-cluster" and data["environment"] == "azureml:lanenb-trainer:3"
    assert data["inputs"]["dataset"]["path"] == "azureml:tusimple:1"
    assert "--data ${{inputs.dataset}} --run-dir ${{outputs.run_dir}}" in data["command"]
    assert "--lr 0.02" in data["command"]  # a trainer flag travels in the command
    assert data["environment_variables"]["HF_TOKEN"] == "<redacted>" and "hf_secret_value" not in out
    assert data["environment_variables"]["LANE_NOTE"] == "kept"

    path = tmp_path / "job.yml"
    path.write_text(text)
    loaded = load_job(path)._to_job()  # the CLI's schema, the SDK's own validation
    expected = build_command(_spec_of(LINE))._to_job()
    got, want = _plain(loaded), _plain(expected)
    want["environment_variables"]["HF_TOKEN"] = "<redacted>"  # what the printed file holds
    assert got == want
    assert list_jobs() == []  # nothing submitted, nothing recorded


def test_default_environment_builds_the_trainer_dockerfile_and_a_local_folder_is_uploaded(tmp_path, capsys):
    from azure.ai.ml import load_job

    data_dir = tmp_path / "tusimple"
    data_dir.mkdir()
    line = (f"train --backend azureml --dry-run --data {data_dir} --compute cpu-cluster -np 2 --large-shm "
            f"--subscription {WORKSPACE['subscription_id']} --resource-group lanes-rg --workspace lanes-ws")
    assert main(line.split()) == 0
    text = _yaml_of(capsys.readouterr().out)
    data = yaml.safe_load(text)
    assert data["environment"] == {"build": {"dockerfile_path": "trainer/Dockerfile",
                                             "path": str(Path(__file__).resolve().parents[2])}}
    assert data["inputs"]["dataset"]["path"] == str(data_dir)  # the SDK uploads it at submit
    assert data["resources"] == {"instance_count": 1, "shm_size": "16g"}  # --large-shm
    (tmp_path / "job.yml").write_text(text)
    loaded = load_job(tmp_path / "job.yml")
    assert loaded.environment.build.dockerfile_path == "trainer/Dockerfile"
    assert loaded.distribution.process_count_per_instance == 2
    assert loaded.inputs["dataset"].path == str(data_dir)


def test_an_image_becomes_the_jobs_environment(capsys):
    assert main(["train", "--backend", "azureml", "--dry-run", "--data", "azureml:tusimple:1", "--compute",
                 "gpu-cluster", "--image", "lanes.azurecr.io/lanenb-trainer:0.1", "--subscription",
                 WORKSPACE["subscription_id"], "--resource-group", "lanes-rg", "--workspace", "lanes-ws"]) == 0
    data = yaml.safe_load(_yaml_of(capsys.readouterr().out))
    assert data["environment"]["image"] == "lanes.azurecr.io/lanenb-trainer:0.1"


def test_dry_run_names_a_missing_workspace_and_still_shows_the_job(capsys):
    code = main(["train", "--backend", "azureml", "--dry-run", "--data", "azureml:tusimple@latest",
                 "--compute", "gpu-cluster"])
    out = capsys.readouterr().out
    assert code == 1
    assert "problem: azureml.subscription_id=None: no AzureML workspace subscription id: give --subscription" in out
    assert "AZURE_SUBSCRIPTION_ID" in out and "config.json" in out
    assert "path: azureml:tusimple@latest" in out


def test_a_sweeps_trial_carries_its_sweep_and_trial_as_job_tags():
    """Trials are labelled on every backend that keeps labels: on AzureML as the job's tags
    (``--label`` too), never over lanenb's own tags."""
    from lanenb.sweeps.params import apply_params, trial_labels

    base = _spec_of(LINE.replace("-e HF_TOKEN=hf_secret_value ", "") + " --label team=lanes --label lanenb.job=mine")
    trial = apply_params(base, {"lr": 0.05, "batch_size": 2}, name="sw-3", labels=trial_labels("sw", 3))
    tags = build_command(trial).tags
    assert tags["lanenb.io/sweep"] == "sw" and tags["lanenb.io/trial"] == "3" and tags["team"] == "lanes"
    assert tags["lanenb.job"] == "sw-3"  # lanenb's own tag wins over a label of that name
    assert trial.labels == {"team": "lanes", "lanenb.job": "mine", "lanenb.io/sweep": "sw", "lanenb.io/trial": "3"}
