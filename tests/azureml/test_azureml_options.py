"""AzureML options and the workspace lookup: every bad value is named before anything is sent."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

import pytest
from azureml_replay import WORKSPACE

from lanenb.backends.azureml.options import AzureMLOptions, data_kind_of
from lanenb.backends.azureml.workspace import resolve_workspace
from lanenb.commands.arguments import add_job_arguments, spec_from_args
from lanenb.contract.spec import TrainSpec
from lanenb.contract.validate import validate
from lanenb.errors import SpecError

GOOD = dict(compute="gpu-cluster", **WORKSPACE)


@pytest.mark.parametrize(("options", "field", "value"), [
    ({"compute": "1gpu"}, "azureml.compute", "1gpu"),
    ({"compute": "gpu_cluster"}, "azureml.compute", "gpu_cluster"),
    ({"compute": "gpu-"}, "azureml.compute", "gpu-"),
    ({"subscription_id": "my-subscription"}, "azureml.subscription_id", "my-subscription"),
    ({"resource_group": "lanes-rg."}, "azureml.resource_group", "lanes-rg."),
    ({"workspace": "ws"}, "azureml.workspace", "ws"),
    ({"workspace": "lanes ws"}, "azureml.workspace", "lanes ws"),
    ({"environment": "lanenb-trainer"}, "azureml.environment", "lanenb-trainer"),
    ({"environment": "lanenb trainer:1"}, "azureml.environment", "lanenb trainer:1"),
    ({"instance_count": 0}, "azureml.instance_count", 0),
    ({"instance_count": "two"}, "azureml.instance_count", "two"),
    ({"shm_size": "16 GB"}, "azureml.shm_size", "16 GB"),
    ({"data_kind": "blob"}, "azureml.data_kind", "blob"),
    ({"experiment": "lane runs"}, "azureml.experiment", "lane runs"),
    ({"compute": ""}, "azureml.compute", ""),
    ({"clusters": "x"}, "azureml", ["clusters"]),
])
def test_a_bad_option_is_named_with_its_value(options, field, value):
    with pytest.raises(SpecError) as info:
        TrainSpec(dataset="azureml:tusimple:1", backend="azureml", azureml={**GOOD, **options})
    assert (info.value.field, info.value.value) == (field, value)
    assert str(info.value).startswith(f"{field}={value!r}: ")


@pytest.mark.parametrize(("spec", "field", "value"), [
    (dict(azureml={}), "azureml.compute", None),
    (dict(dataset="/data/tusimple", azureml={**GOOD, "data_kind": "asset"}), "dataset", "/data/tusimple"),
    (dict(dataset="azureml:tusimple:1", azureml={**GOOD, "data_kind": "local"}), "dataset", "azureml:tusimple:1"),
    (dict(env={"TOKEN": "secret:lanes/token"}, azureml=GOOD), "env", "TOKEN=secret:lanes/token"),
])
def test_rules_across_fields_name_the_field_to_change(spec, field, value):
    spec = {"dataset": "azureml:tusimple:1", "backend": "azureml", **spec}
    with pytest.raises(SpecError) as info:
        TrainSpec(**spec)
    assert (info.value.field, info.value.value) == (field, value)


def test_other_backends_ignore_the_options_and_the_spec_round_trips():
    local = TrainSpec(dataset="/data", azureml={"instance_count": 3})  # not checked against processes locally
    assert local.azureml.instance_count == 3
    spec = TrainSpec(dataset="azureml:tusimple@latest", backend="azureml", processes=4,
                     azureml={**GOOD, "instance_count": "2", "shm_size": "8g"})
    again = TrainSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and again.azureml.instance_count == 2
    old_row = {k: v for k, v in local.to_dict().items() if k != "backend_options"}  # a row with no options
    assert TrainSpec.from_dict(old_row).azureml == AzureMLOptions()


@pytest.mark.parametrize(("dataset", "kind"), [
    ("azureml:tusimple:1", "asset"), ("azureml:tusimple@latest", "asset"),
    ("azureml://datastores/workspaceblobstore/paths/tusimple/", "uri"),
    ("https://lanes.blob.core.windows.net/data/tusimple", "uri"), ("abfss://data@lanes.dfs.core.windows.net/t", "uri"),
    ("/data/tusimple", "local"), ("tusimple", "local"),
])
def test_the_data_kind_follows_the_spelling(dataset, kind):
    assert data_kind_of(dataset) == kind


def test_flags_fill_the_options_and_a_cell_body_keeps_what_the_line_leaves(tmp_path):
    parser = add_job_arguments(argparse.ArgumentParser())
    ns = parser.parse_args(["--backend", "azureml", "--data", "azureml:tusimple:1", "--compute", "gpu-cluster",
                            "--instance-count", "2", "-np", "4", "--shm-size", "16g", "--data-kind", "asset",
                            "--experiment", "lanes", "--azure-config", str(tmp_path / "config.json")])
    spec = spec_from_args(ns, parser, {"azureml": {"workspace": "lanes-ws", "compute": "old-cluster"}})
    assert spec.azureml == AzureMLOptions(compute="gpu-cluster", workspace="lanes-ws",
                                          config=str(tmp_path / "config.json"), instance_count=2, shm_size="16g",
                                          data_kind="asset", experiment="lanes")


@pytest.mark.parametrize(("extra", "field"), [
    (dict(processes=3, azureml={**GOOD, "instance_count": 2}), "processes"),
    (dict(volumes=["lanes-data:/mnt"]), "volumes"),
    (dict(enable_snapshot=True, pvc_name="lanes-data"), "enable_snapshot"),
    (dict(run_dir="/mnt/runs/x"), "run_dir"),
    (dict(dataset="/no/such/folder"), "dataset"),
])
def test_what_azureml_cannot_do_is_named_before_anything_is_sent(extra, field):
    spec = {"dataset": "azureml:tusimple:1", "backend": "azureml", "azureml": GOOD, **extra}
    assert [p.field for p in validate(spec)] == [field]


def test_validate_lists_every_problem_for_a_form():
    problems = validate({"dataset": "azureml:tusimple:1", "backend": "azureml", "processes": 3,
                         "azureml": {"compute": "gpu_cluster"}})
    assert [p.field for p in problems] == ["azureml.compute"]  # the options object fails as a whole first
    problems = validate({"dataset": "azureml:tusimple:1", "backend": "azureml", "azureml": {"compute": "gpu"}})
    assert [p.field for p in problems] == ["azureml.subscription_id"]  # the backend's check: no workspace


# ------------------------------------------------------------------ where the workspace comes from
def test_options_then_environment_then_config_json_each_part_on_its_own(tmp_path):
    (tmp_path / ".azureml").mkdir()
    (tmp_path / ".azureml" / "config.json").write_text(json.dumps(
        {"subscription_id": "11111111-1111-2222-3333-444444444444", "resource_group": "cfg-rg",
         "workspace_name": "cfg-ws"}))
    below = tmp_path / "notebooks" / "lanes"
    below.mkdir(parents=True)
    ref = resolve_workspace(AzureMLOptions(workspace="opt-ws"), env={"AZURE_RESOURCE_GROUP": "env-rg"}, cwd=below)
    assert (ref.subscription_id, ref.resource_group, ref.workspace) == (
        "11111111-1111-2222-3333-444444444444", "env-rg", "opt-ws")
    assert str(tmp_path / ".azureml" / "config.json") in ref.found_in and "AZURE_RESOURCE_GROUP" in ref.found_in


def test_an_explicit_config_file_must_exist_and_be_a_workspace_config(tmp_path):
    with pytest.raises(SpecError, match=r"azureml\.config=.*no such file"):
        resolve_workspace(AzureMLOptions(config=str(tmp_path / "missing.json")), env={}, cwd=tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(SpecError, match="must hold a JSON object"):
        resolve_workspace(AzureMLOptions(config=str(tmp_path / "config.json")), env={}, cwd=tmp_path)


def test_a_bad_value_from_the_environment_is_named_with_the_variable():
    with pytest.raises(SpecError) as info:
        resolve_workspace(AzureMLOptions(), env={"AZURE_SUBSCRIPTION_ID": "prod", "AZURE_RESOURCE_GROUP": "rg",
                                                 "AZUREML_WORKSPACE_NAME": "lanes-ws"}, cwd="/")
    assert info.value.field == "azureml.subscription_id (from AZURE_SUBSCRIPTION_ID)" and info.value.value == "prod"


def test_a_missing_part_says_where_it_can_come_from(tmp_path):
    with pytest.raises(SpecError) as info:
        resolve_workspace(AzureMLOptions(subscription_id=WORKSPACE["subscription_id"], workspace="lanes-ws"),
                          env={}, cwd=tmp_path)
    assert info.value.field == "azureml.resource_group"
    assert "--resource-group" in str(info.value) and "AZURE_RESOURCE_GROUP" in str(info.value)


def test_choosing_and_checking_the_backend_never_loads_the_sdk(tmp_path):
    """The SDK costs seconds to import (bench/azureml_overhead.py): only a call that talks to Azure
    or builds the job may load it, never the registry, the spec, the flags or the checks."""
    code = textwrap.dedent(f"""
        import sys
        from lanenb.contract.validate import validate
        from lanenb.jobs import TrainSpec, get_backend
        spec = TrainSpec(dataset="azureml:tusimple:1", backend="azureml", processes=4,
                         azureml={{"compute": "gpu-cluster", "instance_count": 2, "workspace": "lanes-ws",
                                   "subscription_id": "{WORKSPACE['subscription_id']}", "resource_group": "rg"}})
        assert validate(spec) == [], validate(spec)
        get_backend("azureml").validate(spec)
        loaded = sorted(m for m in sys.modules if m.startswith("azure"))
        assert not loaded, loaded
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
