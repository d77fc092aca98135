"""Resize on resume: a checkpoint written by M ranks, continued on N.

Data parallel training is defined by its global batch (images per optimizer step) and the
learning rate that goes with it. By default a resized run keeps both: each of its N ranks takes
``k = M x b / (N x b')`` micro-batches of its ``--batch-size`` ``b'`` per optimizer step
(gradient accumulation), so every optimizer step still sees the same ``M x b`` images, the
epoch has as many steps and the LR schedule goes on counting optimizer steps as if nothing
changed. When ``M x b`` is not a whole number of ``N x b'`` micro-batches the resume is refused,
naming the numbers, with the batch sizes that would keep it and the other choice:
``--resize-lr-rule`` (``linear``, ``sqrt``: the names and maths ``lanenb.sweeps.scaling_rule``
shows users; ``keep``: the same effective rate) trains at the new global batch ``N x b'`` with
the effective rate (``--lr x ranks``) moved by the rule, the schedule then counting images.

What cannot carry over is said here once:
- **Data order**: nothing lost. The epoch's order is one permutation of the seed and the epoch
  (``data/loader.py``), consumed as a prefix whatever the world size; the checkpoint records
  how many of its samples were consumed (``epoch_position``) and the N ranks split the rest.
- **RNG**: every rank's RNG state belongs to that rank (its dropout masks). M states do not map
  onto N ranks, so after a resize each rank is reseeded deterministically from
  ``(seed, global step, rank)`` (:func:`resize_seed`): a resized run repeats itself exactly, but
  it does not draw the masks an uninterrupted run would have drawn.
- **Per-rank sums and buffers**: the epoch's loss sums are pooled on rank 0 (the epoch's train
  loss stays the mean over all steps); the ranks' own BatchNorm statistics of a preemption
  checkpoint are dropped for rank 0's, which the model state holds (they are averaged at the
  next epoch end anyway).
So a resized run ends close to, not bit-identical with, an uninterrupted one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lanenb_trainer.config import RESIZE_LR_RULES as LR_RULES
from lanenb_trainer.config import TrainConfig, global_batch
from lanenb_trainer.errors import UserError

__all__ = ["LR_RULES", "ResizeError", "ResizePlan", "Schedule", "plan_resize", "resize_seed", "rule_factor"]


class ResizeError(UserError, ValueError):
    """A checkpoint that cannot be continued on this many ranks with this batch size as asked."""


def rule_factor(ratio: float, rule: str) -> float:
    """How the effective learning rate (``--lr x ranks``) follows a global batch ``ratio`` times
    the old one: ``linear`` with it (Goyal et al., 2017), ``sqrt`` with its square root (Hoffer
    et al., 2017), ``keep`` not at all. The one formula of the trainer's resize and the sweep's
    ``scaled_lr``.

    Raises:
        ResizeError: an unknown rule, or a ratio that is not > 0.
    """
    if rule not in LR_RULES:
        raise ResizeError(f"LR rule {rule!r} is not one of {', '.join(LR_RULES)}")
    if not ratio > 0:
        raise ResizeError(f"global batch ratio {ratio!r}: must be > 0")
    return ratio if rule == "linear" else math.sqrt(ratio) if rule == "sqrt" else 1.0


@dataclass(frozen=True)
class Schedule:
    """What the LR schedule of a run is counted against, fixed when the run started and kept
    through every resize: its world size (``lr_at`` scales ``--lr`` by it), global batch and
    total optimizer steps at that batch."""

    world_size: int
    global_batch: int
    total_steps: int

    def to_dict(self) -> dict[str, int]:
        return {"world_size": self.world_size, "global_batch": self.global_batch, "total_steps": self.total_steps}

    @classmethod
    def from_state(cls, state: dict[str, Any], steps_per_epoch: int) -> Schedule:
        """The checkpoint's; an older checkpoint (no ``schedule``) was never resized."""
        saved = state.get("schedule")
        if isinstance(saved, dict):
            return cls(int(saved["world_size"]), int(saved["global_batch"]), int(saved["total_steps"]))
        world = int(state["world_size"])
        batch = int((state.get("config") or {}).get("batch_size") or 0)
        epochs = int((state.get("config") or {}).get("epochs") or 0)
        return cls(world, global_batch(batch, world), steps_per_epoch * epochs)


@dataclass(frozen=True)
class ResizePlan:
    """How this run continues a checkpoint: ``accumulation`` micro-batches per optimizer step and
    the LR ``factor`` on the schedule's rate (1 when the global batch is kept). ``resized`` when
    the checkpoint's world size or per-rank batch differ from this run's."""

    from_world: int
    to_world: int
    from_batch: int
    to_batch: int
    accumulation: int
    lr_rule: str | None  # None: the global batch is kept
    factor: float
    global_batch: int  # images per optimizer step from now on

    @property
    def resized(self) -> bool:
        return (self.from_world, self.from_batch) != (self.to_world, self.to_batch)

    def describe(self) -> dict[str, Any]:
        """The ``resumed`` event's ``resized``."""
        return {"from": self.from_world, "to": self.to_world, "batch_from": self.from_batch,
                "batch_to": self.to_batch, "accumulation": self.accumulation, "lr_rule": self.lr_rule,
                "lr_factor": round(self.factor, 6), "global_batch": self.global_batch}


def plan_resize(state: dict[str, Any], cfg: TrainConfig, world_size: int) -> ResizePlan:
    """Continue ``state`` (a checkpoint) on ``world_size`` ranks of ``cfg.batch_size``.

    Raises:
        ResizeError: the global batch cannot be kept exactly and no ``--resize-lr-rule`` was
            given (the message names both sizes and the batch sizes that would keep it).
    """
    old_world = int(state["world_size"])
    old_batch = int((state.get("config") or {}).get("batch_size") or cfg.batch_size)
    old_k = int(state.get("accumulation") or 1)
    old_global = int(state.get("global_batch") or global_batch(old_batch, old_world) * old_k)
    old_factor = float(state.get("lr_factor") or 1.0)
    micro = global_batch(cfg.batch_size, world_size)
    rule = cfg.resize_lr_rule
    if (old_world, old_batch) == (world_size, cfg.batch_size):
        return ResizePlan(old_world, world_size, old_batch, cfg.batch_size, old_k, None, old_factor, old_global)
    if rule is None:
        if old_global % micro:
            fits = [b for b in range(1, old_global // world_size + 1) if old_global % (b * world_size) == 0]
            raise ResizeError(
                f"the checkpoint's global batch is {old_global} images per step ({old_world} rank(s) x batch "
                f"{old_batch}{f' x {old_k} micro-batches' if old_k > 1 else ''}); {world_size} rank(s) x batch "
                f"{cfg.batch_size} = {micro} does not divide it, so it cannot be kept by gradient accumulation: "
                f"use --batch-size {' or '.join(str(b) for b in fits[-3:])} on {world_size} rank(s), or "
                f"--resize-lr-rule {'|'.join(LR_RULES)} to train at {micro} images per step with the LR moved "
                "by that rule")
        return ResizePlan(old_world, world_size, old_batch, cfg.batch_size, old_global // micro, None, old_factor,
                          old_global)
    # the rate moves from the run's first global batch (the schedule's), however many resizes ago
    first = int((state.get("schedule") or {}).get("global_batch") or old_global)
    return ResizePlan(old_world, world_size, old_batch, cfg.batch_size, 1, rule, rule_factor(micro / first, rule),
                      micro)


def resize_seed(seed: int, global_step: int, rank: int) -> int:
    """The RNG seed of ``rank`` after a resize at ``global_step``: deterministic, distinct per
    rank and per resume point (the M ranks' states cannot be handed to N ranks)."""
    return (int(seed) * 1_000_003 + int(global_step)) * 10_007 + int(rank)
