"""ImageNet weights in torchvision's format for SCNN's backbones, from a local file.

The SCNN paper's numbers start from ImageNet-trained VGG16-BN; torchvision's checkpoints are
what people have (``vgg16_bn-6c64b313.pth``, ``resnet18-f37072fd.pth``, ...). Nothing is
downloaded: the user passes the file. Key mapping:

* ResNet-18/34: our dilated ResNet keeps torchvision's module names, so keys map one to one
  (dilation changes no weight shape); ``fc.*`` (the ImageNet classifier) is skipped.
* VGG16-BN: torchvision's ``features`` has pool4 and pool5 where ours has neither (stride 8),
  so its 13 convs are matched in order rather than by index; ``classifier.*`` is skipped. Our
  convs are bias-free (BatchNorm follows): torchvision's conv bias ``b`` is folded into the
  BatchNorm's running mean (``mean - b``), which gives exactly the same output in eval mode.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn as nn

from lanenb_trainer.config import IMAGENET_BACKBONES

__all__ = ["load_backbone_weights", "TORCHVISION_VGG16_BN_CONVS"]

# torchvision's vgg16_bn features: conv indices (a conv, BN, ReLU triple per conv; "M" pools)
_TV_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def _tv_conv_indices() -> list[int]:
    out, i = [], 0
    for item in _TV_CFG:
        if item == "M":
            i += 1
        else:
            out.append(i)
            i += 3
    return out


TORCHVISION_VGG16_BN_CONVS = _tv_conv_indices()  # [0, 3, 7, 10, 14, 17, 20, 24, 27, 30, 34, 37, 40]
_BN_KEYS = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def _read(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"backbone weights not found: {str(p)!r} (a torchvision-format .pth file; "
                                "nothing is downloaded)")
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"cannot read backbone weights {str(p)!r}: {type(exc).__name__}: {exc}") from exc
    if isinstance(obj, Mapping) and isinstance(obj.get("state_dict"), Mapping):
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"backbone weights {str(p)!r} are not a state dict (name -> tensor)")
    return {k[len("module."):] if k.startswith("module.") else k: v for k, v in obj.items()}


def _vgg_mapping(src: Mapping[str, torch.Tensor], backbone: nn.Module) -> tuple[dict[str, torch.Tensor], list[str]]:
    features = cast(nn.Sequential, backbone.features)  # VGG16Dilated's; Module.__getattr__ says Tensor | Module
    ours = [i for i, m in enumerate(features) if isinstance(m, nn.Conv2d)]
    mapped: dict[str, torch.Tensor] = {}
    used: set[str] = set()
    for tv, me in zip(TORCHVISION_VGG16_BN_CONVS, ours):
        w = f"features.{tv}.weight"
        if w not in src:
            continue
        mapped[f"features.{me}.weight"] = src[w]
        used.add(w)
        for key in _BN_KEYS:
            name = f"features.{tv + 1}.{key}"
            if name in src:
                mapped[f"features.{me + 1}.{key}"] = src[name]
                used.add(name)
        bias = src.get(f"features.{tv}.bias")
        if bias is not None and f"features.{me + 1}.running_mean" in mapped:
            # conv(x) + b then BN(mean) == conv(x) then BN(mean - b)
            mapped[f"features.{me + 1}.running_mean"] = mapped[f"features.{me + 1}.running_mean"] - bias
            used.add(f"features.{tv}.bias")
    return mapped, sorted(set(src) - used)


def load_backbone_weights(model: nn.Module, backbone: str, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load torchvision ImageNet weights into ``model.backbone`` (an SCNN) in place.

    Returns ``{"loaded": [our keys], "skipped": [their keys not used], "missing": [our backbone
    keys left as initialised]}`` so a caller can report what happened.

    Raises:
        FileNotFoundError / ValueError: no such file, not a state dict, a backbone without an
        ImageNet layout (``small``), or no key matched (the wrong architecture's file).
    """
    if backbone not in IMAGENET_BACKBONES:
        raise ValueError(f"--backbone-weights: backbone {backbone!r} has no ImageNet layout; "
                         "use vgg16 (VGG16-BN weights), resnet18 or resnet34")
    src = _read(path)
    target = model.get_submodule("backbone")
    own = target.state_dict()
    if backbone == "vgg16":
        mapped, skipped = _vgg_mapping(src, target)
    else:
        mapped = {k: v for k, v in src.items() if k in own}
        skipped = sorted(set(src) - set(mapped))
    wrong = [f"{k} {tuple(v.shape)} != {tuple(own[k].shape)}" for k, v in mapped.items() if v.shape != own[k].shape]
    if wrong:
        raise ValueError(f"backbone weights {str(path)!r} do not fit the {backbone} backbone: {', '.join(wrong[:3])}")
    if not mapped:
        raise ValueError(f"backbone weights {str(path)!r}: no key matches the {backbone} backbone "
                         f"(first keys: {', '.join(list(src)[:3])}); is it a torchvision {backbone} file?")
    target.load_state_dict({**own, **mapped})
    return {"loaded": sorted(mapped), "skipped": skipped, "missing": sorted(set(own) - set(mapped))}
