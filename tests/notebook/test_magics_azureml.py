"""``%lanetrain --backend azureml --dry-run`` in the notebook: the console's report (the AzureML job
YAML, checked against the SDK's schema in ``tests/azureml``), nothing submitted."""

from __future__ import annotations

import pytest
import yaml

from lanenb.cli import main
from lanenb.jobs import list_jobs

pytest.importorskip("azure.ai.ml", reason="the azureml extra (pip install 'lanenb[azureml]')")

LINE = ("--backend azureml --dry-run --data azureml:tusimple:1 --compute gpu-cluster --nodes 2 -np 4 "
        "--subscription 00000000-1111-2222-3333-444444444444 --resource-group lanes-rg --workspace lanes-ws "
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
