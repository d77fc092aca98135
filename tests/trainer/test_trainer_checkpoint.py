"""Checkpoints load weights-only: everything resume needs comes back, code never runs."""

from __future__ import annotations

import pathlib
import re

import pytest
import torch

from lanenb_trainer import checkpoint
from lanenb_trainer.checkpoint import CheckpointError
from lanenb_trainer.models import build_model


class _Payload:
    """What someone with write access to a shared volume could put into last.pt."""

    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def _state(model, optimizer) -> dict:
    rng = [{"cpu": torch.get_rng_state(), "cuda": None}, {"cpu": torch.get_rng_state(), "cuda": None}]
    return checkpoint.make_state(
        model=model, optimizer=optimizer, scaler=torch.amp.GradScaler("cpu"), epoch=2, step_in_epoch=3,
        global_step=11, lr=0.005, best={"accuracy": 0.81, "epoch": 1}, config={"batch_size": 4, "backbone": "small",
                                                                             "size": (64, 160)},
        world_size=2, rng_states=rng, model_args={"backbone": "small", "input_size": [64, 160]})


def test_everything_resume_needs_loads_weights_only(tmp_path):
    torch.manual_seed(0)
    model = build_model("small", input_size=(64, 160))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model(torch.randn(1, 3, 64, 160))[0].sum().backward()
    optimizer.step()
    state = _state(model, optimizer)
    expected_next = torch.rand(3)  # what the RNG gives right after the saved state
    path = checkpoint.save_atomic(state, tmp_path / "last.pt")

    loaded = checkpoint.load(path)
    assert loaded["global_step"] == 11 and loaded["best"] == {"accuracy": 0.81, "epoch": 1}
    assert loaded["config"]["size"] == (64, 160)
    for key, tensor in model.state_dict().items():
        assert torch.equal(loaded["model"][key], tensor)
    fresh = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    fresh.load_state_dict(loaded["optimizer"])  # momentum buffers included
    torch.set_rng_state(loaded["rng_states"][1]["cpu"])
    assert torch.equal(torch.rand(3), expected_next)


def test_a_checkpoint_carrying_code_is_refused_and_the_code_never_runs(tmp_path):
    marker = tmp_path / "code-ran"
    path = tmp_path / "last.pt"
    torch.save({"format": checkpoint.FORMAT_VERSION, "model": {}, "extra": _Payload(marker)}, path)
    with pytest.raises(CheckpointError, match=r"last.pt holds objects other than weights and was not loaded"):
        checkpoint.load(path)
    assert not marker.exists()


def test_not_a_checkpoint(tmp_path):
    bad = tmp_path / "notes.pt"
    bad.write_text("hello")
    with pytest.raises(CheckpointError, match=re.escape("notes.pt is not a readable checkpoint")):
        checkpoint.load(bad)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(1)}, other)
    with pytest.raises(CheckpointError, match=r"other.pt is not a lanenb checkpoint \(format 1\)"):
        checkpoint.load(other)
    with pytest.raises(ValueError):  # CheckpointError keeps ValueError as its standard base
        checkpoint.load(other)
