"""``--resume`` that continues bit for bit: what a checkpoint records, and how a run takes it back.

A checkpoint (``lanenb_trainer.checkpoint`` reads and writes the file) holds the model,
optimizer and AMP scaler, the loop's position (epoch, steps into it, global step: the LR
schedule is a function of it), the best metrics so far, and every rank's RNG state, because
the dropout masks of the steps after a resume must be the ones an uninterrupted run draws.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lanenb_trainer import checkpoint as ckpt
from lanenb_trainer.config import TrainConfig
from lanenb_trainer.engines import Engine

__all__ = ["RngState", "ResumePoint", "read_resume_point", "load_training_state", "save_checkpoint",
           "last_checkpoint"]


def last_checkpoint(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "last.pt"


@dataclass
class RngState:
    """One rank's torch RNG: CPU, and CUDA on a GPU rank."""

    cpu: torch.Tensor
    cuda: torch.Tensor | None = None

    def restore(self, device: torch.device) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None and device.type == "cuda":
            torch.cuda.set_rng_state(self.cuda, device)


@dataclass
class ResumePoint:
    """Where a checkpoint left the loop, and what it holds for the model (``state``)."""

    epoch: int
    step_in_epoch: int
    global_step: int
    best: dict[str, Any] | None
    lr: float
    rng: RngState | None  # this rank's; None when the world size changed or none was saved
    state: dict[str, Any]

    def describe(self) -> dict[str, Any]:
        """The ``start`` event's ``resumed_from``."""
        return {"epoch": self.epoch, "step": self.global_step, "lr": self.lr}


def read_resume_point(cfg: TrainConfig, run_dir: Path, *, rank: int, world_size: int) -> ResumePoint:
    """``run_dir/checkpoints/last.pt``, checked against this run's config.

    Raises:
        ValueError: the checkpoint was written with another world size, batch size, seed,
            split or backbone (resuming would not be exact). CheckpointError: not loadable.
    """
    state = ckpt.load(last_checkpoint(run_dir))
    ckpt.check_compatible(state, batch_size=cfg.batch_size, world_size=world_size,
                          backbone=cfg.backbone, seed=cfg.seed, val_fraction=cfg.val_fraction,
                          use_val=cfg.use_val)
    rng = None
    saved = state.get("rng_states") or []
    if len(saved) == world_size:
        mine = saved[rank]  # {"cpu", "cuda"}; older checkpoints: the CPU state alone
        rng = (RngState(mine["cpu"], mine.get("cuda")) if isinstance(mine, dict) else RngState(mine))
    return ResumePoint(epoch=state["epoch"], step_in_epoch=state["step_in_epoch"],
                       global_step=state["global_step"], best=state["best"], lr=state["lr"],
                       rng=rng, state=state)


def load_training_state(point: ResumePoint, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        scaler: torch.amp.GradScaler | None) -> None:
    """Model, optimizer and scaler state from the checkpoint. Call it after the engine placed
    the model (a GPU): the optimizer state follows the parameters' device on load; loaded
    before, a 1-rank CUDA run stepped with CPU momentum buffers."""
    ckpt.unwrap(model).load_state_dict(point.state["model"])
    optimizer.load_state_dict(point.state["optimizer"])
    if scaler is not None and point.state.get("scaler"):
        scaler.load_state_dict(point.state["scaler"])


def save_checkpoint(*, engine: Engine, run_dir: Path, cfg: TrainConfig, model_args: dict[str, Any],
                    model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scaler: torch.amp.GradScaler | None, epoch: int, step_in_epoch: int, global_step: int,
                    lr: float, best: dict[str, Any] | None, is_best: bool,
                    emit: Callable[..., None]) -> None:
    """Write ``last.pt`` (and ``best.pt`` when ``is_best``) on rank 0, with a ``checkpoint`` event
    each. A collective: every rank sends its RNG state, so every rank must call it."""
    device = engine.device
    cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    rng_states = engine.gather_objects({"cpu": torch.get_rng_state(), "cuda": cuda_rng})
    if not engine.is_primary:
        return
    state = ckpt.make_state(
        rng_states=rng_states,
        model=model, optimizer=optimizer, scaler=scaler, epoch=epoch,
        step_in_epoch=step_in_epoch, global_step=global_step, lr=lr,
        best=best, config=cfg.to_dict(), world_size=engine.world_size, model_args=model_args)
    path = ckpt.save_atomic(state, last_checkpoint(run_dir))
    emit("checkpoint", path=str(path), epoch=epoch, step=global_step, best=False)
    if is_best:
        path = ckpt.save_atomic(state, run_dir / "checkpoints" / "best.pt")
        emit("checkpoint", path=str(path), epoch=epoch, step=global_step, best=True)
