"""Checkpoints that make ``--resume`` continue exactly where a run stopped.

A checkpoint holds everything the loop's position depends on: model and optimizer state,
the AMP scaler, epoch, steps already taken in that epoch (the sampler skips them on
resume), the global step (which fixes the LR schedule) and the best metrics so far.
Writes go to a temp file in the same directory followed by ``os.replace``, so a crash
mid-write never leaves a truncated ``last.pt`` behind.
"""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import time
import zipfile
import zlib
from pathlib import Path
from typing import Any

import torch

from lanenb_trainer.atomic import atomic_open
from lanenb_trainer.errors import UserError

FORMAT_VERSION = 1


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot (or must not) be loaded."""


class DamagedCheckpointError(CheckpointError):
    """The file's bytes changed after it was written (a record fails its CRC-32) or it is cut short."""


def verify(path: str | os.PathLike) -> None:
    """Check every record of a checkpoint against the CRC-32 its writer stored.

    ``torch.save`` writes a zip whose records carry CRC-32s, but ``torch.load`` never checks them:
    4 KiB of random bytes in the middle of ``last.pt`` loaded silently and the resumed run blamed
    the learning rate for its NaN loss. Reading the file once more costs its size in disk reads.

    Raises:
        DamagedCheckpointError: a record fails its check, or the file is cut short or not a zip.
    """
    with open(path, "rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            return  # not a zip at all: not a checkpoint torch wrote, which load() says in its words
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error) as exc:
        raise DamagedCheckpointError(f"{path} is damaged (cut short or overwritten: {exc})") from None
    if bad is not None:
        raise DamagedCheckpointError(f"{path} is damaged: its record {bad!r} fails its CRC-32 check (the bytes "
                                     "changed after it was written)")


def resumable(last: str | os.PathLike) -> tuple[Path, DamagedCheckpointError | None]:
    """The file a resume continues from: ``last`` (``last.pt``) when its bytes check out, else
    ``best.pt`` beside it (an earlier step: the steps since are taken again), with the damage that
    made it stand in. The one rule for the launcher's check before a resume and the ranks' load.

    Raises:
        FileNotFoundError: no file at ``last``.
        DamagedCheckpointError: ``last`` is damaged and no good ``best.pt`` is beside it.
    """
    last = Path(last)
    if not last.is_file():
        raise FileNotFoundError(f"no checkpoint at {last}")
    try:
        verify(last)
        return last, None
    except DamagedCheckpointError as damaged:
        best = last.with_name("best.pt")
        try:
            verify(best)
        except (DamagedCheckpointError, OSError):
            raise DamagedCheckpointError(f"{damaged}; no good best.pt beside it: nothing to resume from (start the "
                                         "run again from step 0, or retrain from a snapshot)") from None
        return best, damaged


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The bare model inside DistributedDataParallel (its state_dict keys have no ``module.``)."""
    return getattr(model, "module", model)


class DiskFullError(UserError, OSError):
    """A checkpoint did not fit on its disk; the message names the folder, the space free and needed."""


def save_atomic(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save`` into a temp file, renamed into place only when whole (``atomic_open``).

    Raises:
        DiskFullError: the disk filled up while writing: torch says only "[enforce fail at
            inline_container.cc:672] . unexpected pos ..."; this names the folder, what is free
            and about what the checkpoint needs (the tensors' bytes).
    """
    try:
        with atomic_open(path, "wb") as f:
            torch.save(obj, f)
    except (RuntimeError, OSError) as exc:
        folder = Path(path).parent
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            raise exc from None
        need = _tensor_bytes(obj)
        if free >= max(need, 1) and getattr(exc, "errno", None) != errno.ENOSPC:
            raise
        raise DiskFullError(f"writing checkpoint {path} failed: the disk of {folder} is full ({free / 2**20:.0f} MiB "
                            f"free; this checkpoint needs about {need / 2**20:.0f} MiB): free space there or use "
                            "a --run-dir on a larger disk, then resume") from exc
    return Path(path)


def _tensor_bytes(obj: Any) -> int:
    """About what ``torch.save(obj)`` writes: the bytes of every tensor inside."""
    if isinstance(obj, torch.Tensor):
        return obj.element_size() * obj.nelement()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


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


def load(path: str | os.PathLike, *, verified: bool = False) -> dict[str, Any]:
    """Read a checkpoint weights-only: tensors, numbers, strings and containers, never code.

    A full unpickle (``weights_only=False``) of ``last.pt`` on a shared volume would run
    whatever anyone with write access put there. Everything ``make_state`` stores (RNG
    states are uint8 tensors, config and metrics plain JSON values) loads this way.

    Raises:
        FileNotFoundError: no file at ``path``.
        DamagedCheckpointError: its bytes fail their CRC-32 check, or it is cut short.
        CheckpointError: the file is not a lanenb checkpoint, or it holds objects other
            than weights (possibly code) and was refused.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if not verified:  # ``resumable`` checked it already: its bytes are read once more, not twice
        verify(path)
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
