"""``--resume`` that continues bit for bit: what a checkpoint records, and how a run takes it back.

A checkpoint (``lanenb_trainer.checkpoint`` reads and writes the file) holds the model,
optimizer and AMP scaler, the loop's position (epoch, steps into it, global step: the LR
schedule is a function of it), the best metrics so far, every rank's RNG state, because
the dropout masks of the steps after a resume must be the ones an uninterrupted run draws,
and every rank's sums over the epoch so far (``EpochTally``), so an epoch finished after a
mid-epoch resume reports the train loss an uninterrupted one does.

Which checkpoint a run continues from is :func:`resume_state`: ``last.pt`` with ``--resume``,
and without it when ``last.pt`` was written under this run's ``--run-id`` (a launcher starting
the same run again: the local supervisor's ``--max-restarts``, the MPI Operator's retries).
A checkpoint written by another number of ranks is continued too (``resize.py``: the global
batch kept by gradient accumulation, or an LR rule), close to but not bit for bit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lanenb_trainer import checkpoint as ckpt
from lanenb_trainer.config import TrainConfig
from lanenb_trainer.engines import Engine
from lanenb_trainer.stopping import PREEMPTED, RESUMED_BY_ENV
from lanenb_trainer.training.resize import ResizePlan, plan_resize, resize_seed

__all__ = ["RngState", "EpochTally", "ResumePoint", "resume_state", "read_resume_point", "load_training_state",
           "save_checkpoint", "last_checkpoint"]


def last_checkpoint(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "last.pt"


@dataclass
class EpochTally:
    """One rank's sums over the steps of the current epoch: the ``epoch`` event's train loss
    (float64, step by step, as the loop adds), images and seconds so far."""

    loss_sum: float = 0.0
    steps: float = 0.0
    images: int = 0
    seconds: float = 0.0

    def to_list(self) -> list[float]:
        return [self.loss_sum, self.steps, float(self.images), self.seconds]

    @classmethod
    def from_list(cls, values: Any) -> EpochTally | None:
        """None for anything but the four numbers :meth:`to_list` wrote (an older checkpoint)."""
        if not isinstance(values, (list, tuple)) or len(values) != 4:
            return None
        return cls(float(values[0]), float(values[1]), int(values[2]), float(values[3]))


@dataclass
class RngState:
    """One rank's torch RNG: CPU, and CUDA on a GPU rank."""

    cpu: torch.Tensor | None
    cuda: torch.Tensor | None = None
    seed: int | None = None  # after a resize: no state to restore, a seed (resize.resize_seed)

    def restore(self, device: torch.device) -> None:
        if self.seed is not None:
            torch.manual_seed(self.seed)  # the CPU and every GPU
            return
        assert self.cpu is not None
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
    tally: EpochTally | None = None  # this rank's sums over the epoch so far (None: not saved)
    buffers: dict[str, torch.Tensor] | None = None  # this rank's own buffers (preemption checkpoints)
    preempted: bool = False  # written when a SIGTERM stopped the run (training/preempt.py)
    stop_reason: str | None = None  # why: preempted, suspended or cancelled (lanenb_trainer.stopping)
    automatic: bool = False  # taken without --resume: the run's own checkpoint (its --run-id)
    saved_at: float | None = None  # the checkpoint's write time: which one was resumed
    plan: ResizePlan | None = None  # how this run's size continues the checkpoint's (resize.py)

    def describe(self) -> dict[str, Any]:
        """The ``start`` event's ``resumed_from``."""
        return {"epoch": self.epoch, "step": self.global_step, "lr": self.lr}


def resume_state(cfg: TrainConfig, run_dir: Path) -> tuple[dict[str, Any], bool] | None:
    """The checkpoint this run continues from, and whether it was chosen without ``--resume``.

    With ``--resume``: ``last.pt``, whatever run wrote it. Without: ``last.pt`` when its config
    carries this run's ``--run-id``, so a launcher that starts the same run again (a retry
    after a preemption or a killed rank) continues instead of overwriting its checkpoints,
    while a new run in a reused run dir (another id, or none) starts from step 0 as before.

    Raises:
        CheckpointError: ``last.pt`` cannot be loaded. FileNotFoundError: ``--resume`` and no
            ``last.pt`` (``parse_config`` checks it first).
    """
    path = last_checkpoint(run_dir)
    if cfg.resume:
        return _load_or_best(path), False
    if not cfg.run_id or not path.is_file():
        return None
    state = _load_or_best(path)
    if (state.get("config") or {}).get("run_id") != cfg.run_id:
        return None
    # automatic: a launcher's retry; a person's resume (job.resume(), the sidebar) is said so
    return state, os.environ.get(RESUMED_BY_ENV) != "user"


DAMAGED_NOTE = "damaged_note"  # in a state loaded in place of a damaged last.pt: what happened, in words


def _load_or_best(path: Path) -> dict[str, Any]:
    """``last.pt``; when its bytes are damaged, ``best.pt`` of the same run dir (an earlier step:
    the steps since are taken again, and the ``resumed`` event counts them), with the reason in
    ``state[DAMAGED_NOTE]``. Without a good ``best.pt`` the damage is raised."""
    chosen, damaged = ckpt.resumable(path)
    state = ckpt.load(chosen, verified=True)
    if damaged is not None:
        state[DAMAGED_NOTE] = (f"{damaged}; continuing from best.pt instead (step {state.get('global_step')}, "
                               f"epoch {state.get('epoch')})")
    return state


def read_resume_point(cfg: TrainConfig, run_dir: Path, *, rank: int, world_size: int,
                      state: dict[str, Any] | None = None, automatic: bool = False) -> ResumePoint:
    """``run_dir/checkpoints/last.pt`` (or ``state``, already loaded), checked against this
    run's config.

    Another world size or batch size is a resize (``resize.plan_resize``): each rank is then
    reseeded (``resize.resize_seed``), rank 0 takes the pooled epoch sums and every rank rank 0's
    buffers (the model state's).

    Raises:
        ValueError: the checkpoint was written with another seed, split or backbone (resuming
            would not be exact). ResizeError: another size whose global batch cannot be kept
            and no ``--resize-lr-rule``. CheckpointError: not loadable.
    """
    if state is None:
        state = ckpt.load(last_checkpoint(run_dir))
    ckpt.check_compatible(state, batch_size=None, world_size=None,
                          backbone=cfg.backbone, seed=cfg.seed, val_fraction=cfg.val_fraction,
                          use_val=cfg.use_val)
    plan = plan_resize(state, cfg, world_size)
    rng: RngState | None = None
    tally: EpochTally | None = None
    buffers: dict[str, torch.Tensor] | None = None
    tallies = state.get("epoch_tallies") or []
    if plan.resized:  # no rank's state maps to another size: a seed, rank 0 the pooled sums
        rng = RngState(None, seed=resize_seed(cfg.seed, state["global_step"], rank))
        tally = _pooled_tally(tallies, rank)
    else:
        saved = state.get("rng_states") or []
        if len(saved) == world_size:
            mine = saved[rank]  # {"cpu", "cuda"}; older checkpoints: the CPU state alone
            rng = (RngState(mine["cpu"], mine.get("cuda")) if isinstance(mine, dict) else RngState(mine))
        tally = EpochTally.from_list(tallies[rank]) if len(tallies) == world_size else None
        rank_buffers = state.get("rank_buffers") or []
        buffers = rank_buffers[rank] if len(rank_buffers) == world_size else None
    return ResumePoint(epoch=state["epoch"], step_in_epoch=state["step_in_epoch"],
                       global_step=state["global_step"], best=state["best"], lr=state["lr"],
                       rng=rng, state=state, tally=tally, preempted=bool(state.get("preempted")),
                       stop_reason=_reason(state.get("preempted")),
                       automatic=automatic, buffers=buffers, saved_at=state.get("saved_at"), plan=plan)


def _reason(preempted: Any) -> str | None:
    """The checkpoint's ``preempted``: the stop's reason (a word), ``True`` from older files, or no stop."""
    if isinstance(preempted, str):
        return preempted
    return PREEMPTED if preempted else None


def _pooled_tally(tallies: list[Any], rank: int) -> EpochTally | None:
    """After a resize: the M ranks' epoch sums pooled on rank 0 (the epoch's train loss is their
    sum over all ranks), nothing on the others; every rank keeps the epoch's seconds so far."""
    found = [t for t in (EpochTally.from_list(x) for x in tallies) if t is not None]
    if not found:
        return None
    seconds = max(t.seconds for t in found)
    if rank:
        return EpochTally(seconds=seconds)
    return EpochTally(sum(t.loss_sum for t in found), sum(t.steps for t in found), sum(t.images for t in found),
                      seconds)


def load_training_state(point: ResumePoint, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        scaler: torch.amp.GradScaler | None) -> None:
    """Model, optimizer and scaler state from the checkpoint. Call it after the engine placed
    the model (a GPU): the optimizer state follows the parameters' device on load; loaded
    before, a 1-rank CUDA run stepped with CPU momentum buffers."""
    bare = ckpt.unwrap(model)
    bare.load_state_dict(point.state["model"])
    if point.buffers:  # this rank's running statistics, as they were when it was preempted
        with torch.no_grad():
            for name, buf in bare.named_buffers():
                if name in point.buffers:
                    buf.copy_(point.buffers[name])
    optimizer.load_state_dict(point.state["optimizer"])
    if scaler is not None and point.state.get("scaler"):
        scaler.load_state_dict(point.state["scaler"])


def save_checkpoint(*, engine: Engine, run_dir: Path, cfg: TrainConfig, model_args: dict[str, Any],
                    model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scaler: torch.amp.GradScaler | None, epoch: int, step_in_epoch: int, global_step: int,
                    lr: float, best: dict[str, Any] | None, is_best: bool,
                    emit: Callable[..., None], tally: EpochTally | None = None,
                    preempted: bool | str = False, sizing: dict[str, Any] | None = None) -> None:
    """Write ``last.pt`` (and ``best.pt`` when ``is_best``) on rank 0, with a ``checkpoint`` event
    each. A collective: every rank sends its RNG state and its ``tally`` of the epoch so far,
    so every rank must call it. ``preempted``: a SIGTERM stopped the run here, between two
    buffer averages (``replicas.sync_buffers``, at epoch ends), so every rank's own buffers
    (BatchNorm's running statistics) are saved too and each rank gets its own back. ``sizing``:
    what a resume on another number of ranks needs (``checkpoint.make_state``)."""
    device = engine.device
    cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
    buffers = ({name: b.detach().cpu() for name, b in ckpt.unwrap(model).named_buffers()} if preempted else None)
    mine = ({"cpu": torch.get_rng_state(), "cuda": cuda_rng}, (tally or EpochTally()).to_list(), buffers)
    gathered = engine.gather_objects(mine)
    if not engine.is_primary:
        return
    state = ckpt.make_state(
        rng_states=[g[0] for g in gathered], epoch_tallies=[g[1] for g in gathered], preempted=preempted,
        rank_buffers=[g[2] for g in gathered] if preempted else None,
        model=model, optimizer=optimizer, scaler=scaler, epoch=epoch,
        step_in_epoch=step_in_epoch, global_step=global_step, lr=lr,
        best=best, config=cfg.to_dict(), world_size=engine.world_size, model_args=model_args, sizing=sizing)
    path = ckpt.save_atomic(state, last_checkpoint(run_dir))
    emit("checkpoint", path=str(path), epoch=epoch, step=global_step, best=False)
    if is_best:
        path = ckpt.save_atomic(state, run_dir / "checkpoints" / "best.pt")
        emit("checkpoint", path=str(path), epoch=epoch, step=global_step, best=True)
