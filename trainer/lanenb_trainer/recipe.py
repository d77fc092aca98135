"""The training recipe's formulas: the SCNN loss and the learning-rate schedule.

Pure functions of their inputs (no rank, no engine), so tests and ``bench/scaling.py`` use
them without a training run, and a resumed run follows the schedule exactly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lanenb_trainer.config import TrainConfig

__all__ = ["BACKGROUND_WEIGHT", "EXIST_WEIGHT", "WARMUP_SHARE", "lr_at", "scnn_loss", "warmup_for"]

WARMUP_SHARE = 0.2  # at most this share of a run warms up
BACKGROUND_WEIGHT = 0.4  # the SCNN paper's class weight for background pixels
EXIST_WEIGHT = 0.1  # weight of the lane-existence BCE beside the segmentation CE


def warmup_for(warmup_steps: int, total_steps: int) -> int:
    """The warm-up a run of ``total_steps`` uses: ``--warmup-steps``, but at most a fifth of the
    run (at least 1 step when asked for any).

    A short run (the docs' first command: 4 epochs of a small dataset, ~40 steps) with the default
    50 warm-up steps never reached its learning rate and ended at test accuracy 0.00-0.37; a warm-up
    is there to steady the first steps, not to be the whole run. Long runs are unchanged.
    """
    if warmup_steps <= 0:
        return 0
    return max(1, min(warmup_steps, int(total_steps * WARMUP_SHARE)))


def lr_at(step: int, cfg: TrainConfig, world_size: int, total_steps: int) -> float:
    """Poly decay with linear warm-up (``warmup_for``); the base LR is scaled linearly by the
    world size.

    A pure function of the global step, so a resumed run follows the schedule exactly.
    """
    base = cfg.lr * world_size
    warmup = warmup_for(cfg.warmup_steps, total_steps)
    warm = min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0
    progress = min(step, total_steps) / max(1, total_steps)
    return base * warm * (1.0 - progress) ** cfg.poly_power


def scnn_loss(seg_logits: torch.Tensor, exist_logits: torch.Tensor, mask: torch.Tensor,
              exist: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Weighted CE (background 0.4) + 0.1 x lane-existence BCE, as the SCNN paper trains.

    The weighted mean is written out (log-softmax, gather, two sums) rather than
    ``F.cross_entropy(weight=...)``: CUDA's weighted ``nll_loss2d`` sums with atomics, so a
    ``--deterministic`` run on a GPU did not repeat itself (seen on an H200: 1.2% loss drift
    after a resume); these sums are ordered reductions, the value is the same.
    """
    weight = torch.ones(seg_logits.shape[1], device=seg_logits.device, dtype=torch.float32)
    weight[0] = BACKGROUND_WEIGHT
    nll = -F.log_softmax(seg_logits.float(), dim=1).gather(1, mask.unsqueeze(1)).squeeze(1)
    pixel_weight = weight[mask]
    seg = (nll * pixel_weight).sum() / pixel_weight.sum()
    ex = F.binary_cross_entropy_with_logits(exist_logits.float(), exist.float())
    return seg + EXIST_WEIGHT * ex, seg.detach(), ex.detach()
