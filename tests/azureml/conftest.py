"""Fixtures for the azureml backend tests: an isolated LANENB_HOME (the job registry), no
workspace variables from the machine running the tests, and a backend whose SDK pipelines
replay recorded HTTP (``azureml_replay.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("azure.ai.ml", reason="the azureml extra (pip install 'lanenb[azureml]')")

from azureml_replay import FakeCredential, ReplayAdapter, transport
from homes import lanenb_home  # noqa: F401  (autouse: every test gets its own LANENB_HOME)


@pytest.fixture(autouse=True)
def no_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No workspace of the machine running the tests is found: neither its variables nor a
    config.json in the working directory."""
    for var in ("AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_GROUP", "AZUREML_WORKSPACE_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # no config.json of the developer's is found by accident


@pytest.fixture
def replayed() -> Callable[..., tuple[dict[str, Any], ReplayAdapter]]:
    """``replayed("file.json", ...)`` -> (backend options for ``submit``/``get_backend``, the adapter)."""

    def make(*recordings: str, **names: str) -> tuple[dict[str, Any], ReplayAdapter]:
        adapter = ReplayAdapter(*recordings, **names)
        return {"credential": FakeCredential(), "transport": transport(adapter), "poll_interval": 0.0}, adapter

    return make
