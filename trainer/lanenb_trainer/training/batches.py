"""A loader batch onto the rank's device, as training and evaluation both need it."""

from __future__ import annotations

import torch

from lanenb_trainer.data.augment import normalize_images

__all__ = ["to_device"]


def to_device(batch: dict, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """uint8 images/masks from the loader -> normalised float images, long masks and lane
    existence, on ``device``. Workers ship uint8 (a quarter of float32's bytes through shared
    memory); normalising here is one op per batch."""
    images = normalize_images(batch["image"].to(device, non_blocking=True))
    mask = batch["mask"].to(device, non_blocking=True).long()
    return images, mask, batch["exist"].to(device, non_blocking=True)
