"""Fixtures for the model tests: the bench's published per-slice loop as the reference."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def _load_bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def mp_bench() -> ModuleType:
    return _load_bench("scnn_message_passing")


@pytest.fixture(autouse=True)
def _few_threads():
    # The CI/dev box is shared: keep every test on one thread and deterministic seeds.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(before)
