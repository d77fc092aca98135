"""Fixtures for the model tests: the bench's published per-slice loop as the reference."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch
from bench_scripts import load_bench


@pytest.fixture(scope="session")
def mp_bench() -> ModuleType:
    return load_bench("scnn_message_passing")


@pytest.fixture(autouse=True)
def _few_threads():
    # The CI/dev box is shared: keep every test on one thread and deterministic seeds.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(before)
