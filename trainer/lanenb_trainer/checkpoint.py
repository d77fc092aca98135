"""Checkpoints that make ``--resume`` continue exactly where a run stopped.

A checkpoint holds everything the loop's position depends on: model and optimizer state,
the AMP scaler, epoch, steps already taken in that epoch (the sampler skips them on
resume), the global step (which fixes the LR schedule) and the best metrics so far.
Writes go to a temp file in the same directory followed by ``os.replace``, so a crash
mid-write never leaves a truncated ``last.pt`` behind.
"""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path
from typing import Any

import torch

from lanenb_trainer.atomic import atomic_open
from lanenb_trainer.errors import UserError

FORMAT_VERSION = 1


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot (or must not) be loaded."""


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The bare model inside DistributedDataParallel (its state_dict keys have no ``module.``)."""
    return getattr(model, "module", model)


def save_atomic(obj: Any, path: str | os.PathLike) -> Path:
    with atomic_open(path, "wb") as f:
        torch.save(obj, f)
    return Path(path)


def make_state(*, model, optimizer, scaler, epoch: int, step_in_epoch: int, global_step: int,
               lr: float, best: dict | None, config: dict, world_size: int,
               rng_states: list | None = None, model_args: dict | None = None,
               epoch_tallies: list | None = None, preempted: bool | str = False,
               rank_buffers: list | None = None, sizing: dict | None = None) -> dict[str, Any]:
    """The checkpoint's dict. ``sizing`` (training/resize.py) says what a run on another number of
    ranks needs: ``accumulation`` (micro-batches per optimizer step), ``global_batch`` (images per
    optimizer step), ``lr_factor`` (a resize's LR rule), ``schedule`` (the world size, global batch
    and total steps the LR schedule counts against), ``epoch_position`` (samples of the epoch's
    order consumed by all ranks) and ``images_done`` (since step 0); absent in older checkpoints."""
    return {
        # what build_model needs to rebuild this very model (lanenb predict/export read it)
        "model_args": model_args,
        "format": FORMAT_VERSION,
        "model": unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else None,
        "epoch": epoch,
        "step_in_epoch": step_in_epoch,
        "global_step": global_step,
        "lr": lr,
        "best": best,
        "config": config,
        "world_size": world_size,
        "rng_states": rng_states,  # torch RNG of every rank, in rank order
        # every rank's sums over the epoch so far [loss, steps, images, seconds], in rank order
        "epoch_tallies": epoch_tallies,
        # written when a SIGTERM stopped the run at this step: why (preempted, suspended, cancelled)
        "preempted": preempted,
        "saved_at": time.time(),  # which checkpoint this is: a resume names it (training/attempts.py)
        # with ``preempted``: every rank's buffers {name: tensor} (they are averaged at epoch ends only)
        "rank_buffers": rank_buffers,
        **(sizing or {}),
    }


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint weights-only: tensors, numbers, strings and containers, never code.

    A full unpickle (``weights_only=False``) of ``last.pt`` on a shared volume would run
    whatever anyone with write access put there. Everything ``make_state`` stores (RNG
    states are uint8 tensors, config and metrics plain JSON values) loads this way.

    Raises:
        FileNotFoundError: no file at ``path``.
        CheckpointError: the file is not a lanenb checkpoint, or it holds objects other
            than weights (possibly code) and was refused.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights only" in str(exc).lower():
            detail = next((ln.strip() for ln in str(exc).splitlines() if "Unsupported global" in ln), "")
            detail = detail.split(". Please use")[0]  # torch's advice is to trust it: not ours
            raise CheckpointError(
                f"{path} holds objects other than weights and was not loaded (it could run code)"
                + (f": {detail}" if detail else "") + "; use a checkpoint written by lanenb_trainer") from exc
        raise CheckpointError(f"{path} is not a readable checkpoint: {exc}") from exc
    except (RuntimeError, EOFError, KeyError, ValueError, IndexError) as exc:  # not a torch file, truncated
        raise CheckpointError(f"{path} is not a readable checkpoint: {type(exc).__name__}: {exc}") from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"{path} is not a lanenb checkpoint (format {FORMAT_VERSION})")
    return state


def check_compatible(state: dict[str, Any], *, batch_size: int | None, world_size: int | None, backbone: str,
                     seed: int | None = None, val_fraction: float | None = None,
                     use_val: bool | None = None) -> None:
    """``--resume`` is exact only with what fixed the data order and the split: world size, batch
    size, seed, validation hold-out and ``--use-val``, and of course the backbone. ``None`` leaves
    a value unchecked: a resize (training/resize.py) checks world size and batch size itself."""
    cfg = state.get("config", {})
    problems = []
    if world_size is not None and state.get("world_size") != world_size:
        problems.append(f"world size {state.get('world_size')} (now {world_size})")
    checks = [("batch size", "batch_size", batch_size), ("backbone", "backbone", backbone),
              ("--seed", "seed", seed), ("--val-fraction", "val_fraction", val_fraction),
              ("--use-val", "use_val", use_val)]
    for label, key, now in checks:
        if now is not None and cfg.get(key) != now:
            was = cfg.get(key)
            problems.append(f"{label} {was!r} (now {now!r})" if isinstance(now, str) else f"{label} {was} (now {now})")
    if problems:
        raise ValueError("--resume: the checkpoint was written with " + ", ".join(problems)
                         + "; resume with the same settings or start a new run directory")
