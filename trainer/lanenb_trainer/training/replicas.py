"""Data-parallel ranks must hold one model: make them agree, and prove that they do."""

from __future__ import annotations

import hashlib

import torch

from lanenb_trainer import checkpoint as ckpt
from lanenb_trainer.engines import Engine

__all__ = ["param_checksum", "sync_buffers"]


def param_checksum(model: torch.nn.Module, *, buffers: bool = False) -> str:
    """SHA-256 of the parameters (and buffers): equal on all ranks iff they hold the same model."""
    h = hashlib.sha256()
    m = ckpt.unwrap(model)
    items = m.state_dict().items() if buffers else m.named_parameters()
    for name, t in items:
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def sync_buffers(model: torch.nn.Module, engine: Engine) -> None:
    """Average BatchNorm running statistics, which data-parallel training leaves per rank.

    Done before evaluation and checkpoints so every rank evaluates (and rank 0 saves) the
    same model.
    """
    if engine.world_size == 1:
        return
    for buf in ckpt.unwrap(model).buffers():
        if buf.is_floating_point():
            buf.copy_(engine.allreduce_sum(buf) / engine.world_size)
