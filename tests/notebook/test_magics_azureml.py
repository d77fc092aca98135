"""The notebook faces on the azureml backend: ``%lanetrain --backend azureml --dry-run`` prints the
console's report (the AzureML job YAML, checked against the SDK's schema in ``tests/azureml``) and
submits nothing; ``TrainPanel`` takes its bounds from the compute cluster (recorded HTTP)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from lanenb.cli import main
from lanenb.jobs import list_jobs

pytest.importorskip("azure.ai.ml", reason="the azureml extra (pip install 'lanenb[azureml]')")

from azureml_replay import WORKSPACE, FakeCredential, ReplayAdapter, transport

LINE = ("--backend azureml --dry-run --data azureml:tusimple:1 --compute gpu-cluster --nodes 2 -np 4 "
        f"--subscription {WORKSPACE['subscription_id']} --resource-group lanes-rg --workspace lanes-ws "
        "--azureml-environment lanenb-trainer:3 --name lane-az-magic")


def test_lanetrain_dry_run_prints_the_azureml_job_and_submits_nothing(ip, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert ip.run_line_magic("lanetrain", LINE) is None
    magic_out = capsys.readouterr().out
    assert main(["train", *LINE.split()]) == 0
    assert capsys.readouterr().out == magic_out
    job = yaml.safe_load(magic_out.split("\n", 1)[1])
    assert job["name"] == "lane-az-magic" and job["compute"] == "azureml:gpu-cluster"
    assert job["distribution"] == {"type": "mpi", "process_count_per_instance": 2}
    assert list_jobs() == []


def test_train_panel_bounds_come_from_the_compute_cluster(monkeypatch):
    from lanenb.backends.azureml import AzureMLBackend
    from lanenb.contract import backends
    from lanenb.notebook.panel import TrainPanel

    http = ReplayAdapter("capacity_gpu.json", "data_assets.json")
    replay = dataclasses.replace(backends.get_descriptor("azureml"), factory=lambda **kw: AzureMLBackend(
        credential=FakeCredential(), transport=transport(http), **kw))
    monkeypatch.setitem(backends._DESCRIPTORS, "azureml", replay)
    panel = TrainPanel(backend="azureml", dataset="azureml:tusimple:1",
                       azureml={"compute": "gpu-cluster", "instance_count": 4, **WORKSPACE})
    assert (panel.processes.max, panel.gpus.max) == (32, 8)  # 4 nodes x ND96amsr_A100_v4 (8 GPUs)
    assert panel.dataset.options == ("azureml:culane@latest", "azureml:tusimple@latest")
    assert panel.spec_fields()["dataset"] == "azureml:tusimple:1" and "volumes" not in panel.spec_fields()
    panel.processes.value = 8
    assert panel.problems == [] and not panel.launch.disabled, [str(p) for p in panel.problems]
    panel.processes.value = 6  # 6 ranks do not split over 4 nodes
    assert [p.field for p in panel.problems] == ["processes"] and panel.launch.disabled
    http.assert_done()
