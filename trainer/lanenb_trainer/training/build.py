"""What a run is made of: the three splits, the model and its optimizer, and the train
loader (the AMP scaler and memory format: ``precision.py``), each built from the config alone.

The order of the calls is part of the recipe: the model is initialised from ``--seed`` (the
same on every rank), then each rank reseeds for its own dropout stream. ``loop.Trainer``
calls them in that order, with ``resume.py`` loading a checkpoint in between.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from lanenb_trainer.config import TrainConfig, global_batch
from lanenb_trainer.data.masks import NUM_SLOTS

__all__ = ["Splits", "build_splits", "build_model", "build_optimizer", "build_train_loader"]

Log = Callable[[str], None]


class Splits(NamedTuple):
    """The datasets of a run (``val`` without ``--use-val``, ``test`` without a test label file: None)."""

    train: Any
    val: Any | None
    test: Any | None


def build_splits(cfg: TrainConfig, world_size: int, log: Log | None = None) -> Splits:
    """The train/val/test splits of ``--data`` (``log`` says why there is no test split).

    Raises:
        ValueError: the labels are invalid, or too few training frames for one global batch.
    """
    from lanenb_trainer.data.tusimple import TuSimpleDataset

    vf = cfg.val_fraction if cfg.use_val else 0.0
    # normalize=False: workers ship uint8 frames/masks, batches.to_device normalises per batch
    train = TuSimpleDataset(cfg.data, "train", size=cfg.image_size, augment=cfg.augment,
                            seed=cfg.seed, val_fraction=vf, normalize=False)
    val = (TuSimpleDataset(cfg.data, "val", size=cfg.image_size, augment=False,
                           seed=cfg.seed, val_fraction=vf, normalize=False)
           if cfg.use_val else None)
    try:
        test = TuSimpleDataset(cfg.data, "test", size=cfg.image_size, augment=False,
                               seed=cfg.seed, normalize=False)
    except ValueError as exc:  # no test_label.json: train anyway, say why there is no test score
        test = None
        if log is not None:
            log(f"no test evaluation: {exc}")
    if len(train) < global_batch(cfg.batch_size, world_size):
        raise ValueError(
            f"{len(train)} training frames cannot fill one batch of {cfg.batch_size} "
            f"on each of {world_size} ranks; lower --batch-size or add data")
    return Splits(train, val, test)


def build_model(cfg: TrainConfig, rank: int, log: Log | None = None, *,
                resuming: bool | None = None) -> torch.nn.Module:
    """The SCNN of ``--backbone``, initialised from ``--seed`` (the same on every rank), with
    ``--weights`` or, on a fresh run (not ``resuming``; None: not ``--resume``),
    ``--backbone-weights`` loaded; ``log`` reports the latter. Leaves the RNG seeded per rank
    (``seed + 1 + rank``) for the dropout masks."""
    from lanenb_trainer.models import build_model as build_scnn

    torch.manual_seed(cfg.seed)
    model = build_scnn(cfg.backbone, num_lanes=NUM_SLOTS, input_size=cfg.image_size, weights=cfg.weights)
    if resuming is None:
        resuming = cfg.resume
    if cfg.backbone_weights and not resuming:
        from lanenb_trainer.models.pretrained import load_backbone_weights

        report = load_backbone_weights(model, cfg.backbone, cfg.backbone_weights)
        if log is not None:
            log(f"backbone weights {cfg.backbone_weights}: {len(report['loaded'])} tensors loaded, "
                f"{len(report['skipped'])} skipped ({', '.join(report['skipped'][:4])}"
                f"{', ...' if len(report['skipped']) > 4 else ''}), "
                f"{len(report['missing'])} left as initialised")
    # Same init everywhere (rank 0's is broadcast anyway); a per-rank stream for dropout.
    torch.manual_seed(cfg.seed + 1 + rank)
    return model


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig, world_size: int) -> torch.optim.Optimizer:
    """SGD at the linearly scaled LR (``--lr`` per rank x ranks); the schedule sets it per step."""
    return torch.optim.SGD(model.parameters(), lr=cfg.lr * world_size,
                           momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def build_train_loader(train: Any, cfg: TrainConfig, rank: int, world_size: int) -> Any:
    """This rank's shuffled shard of the train split; its sampler can start mid-epoch (resume)."""
    from lanenb_trainer.data.loader import build_loader

    return build_loader(train, cfg.batch_size, rank=rank, world_size=world_size,
                        num_workers=cfg.loader_workers, shuffle=True, seed=cfg.seed, drop_last=True)
