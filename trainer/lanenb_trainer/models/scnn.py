"""SCNN lane detector (Pan et al. 2018, "Spatial As Deep"), torchvision-style builders.

backbone (stride 8, 128 channels) -> message passing (down, up, right, left; kernel 9)
-> Dropout2d -> 1x1 conv to ``1 + num_lanes`` classes (background + lane slots), bilinearly
upsampled to the input size; and the lane-existence branch of the paper: softmax of the
stride-8 segmentation -> average pool -> fc -> relu -> fc -> ``num_lanes`` logits.

The paper's existence fc reads a fixed 2x-pooled map (18x50 for 288x800 input). Here the
pool is adaptive to a grid fixed at construction from ``input_size`` (``input_size / 16``),
so the same weights accept any input size whose sides are multiples of 8.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from lanenb_trainer.model_registry import get_model_builder

from .message_passing import MessagePassing
from .resnet import resnet18_dilated, resnet34_dilated
from .small import small_backbone
from .vgg import vgg16_dilated

__all__ = [
    "SCNN",
    "build_model",
    "build_from_checkpoint",
    "load_weights",
    "scnn_resnet18",
    "scnn_resnet34",
    "scnn_small",
    "scnn_vgg16",
]

FEATURE_STRIDE = 8


class SCNN(nn.Module):
    """``model(x [N,3,H,W]) -> (seg_logits [N,1+num_lanes,H,W], exist_logits [N,num_lanes])``.

    Both outputs are logits (no softmax/sigmoid): the loss applies them. ``H`` and ``W`` must
    be multiples of 8.
    """

    def __init__(
        self,
        backbone: nn.Module,
        *,
        num_lanes: int = 4,
        input_size: tuple[int, int] = (288, 800),
        mp_kernel: int = 9,
        dropout: float = 0.1,
        exist_hidden: int = 128,
    ) -> None:
        super().__init__()
        if not isinstance(num_lanes, int) or num_lanes < 1:
            raise ValueError(f"num_lanes must be a positive int, got {num_lanes!r}")
        _check_size(input_size, "input_size")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        channels = int(getattr(backbone, "out_channels", 0))
        if channels < 1:
            raise ValueError("backbone must define a positive `out_channels` attribute")
        self.num_lanes = num_lanes
        self.input_size = (int(input_size[0]), int(input_size[1]))
        self.backbone = backbone
        self.message_passing = MessagePassing(channels, mp_kernel)
        self.dropout = nn.Dropout2d(dropout)
        self.seg_head = nn.Conv2d(channels, 1 + num_lanes, 1)
        # The paper pools the stride-8 map by 2: a grid of input_size / 16 (18x50 at 288x800).
        self.exist_grid = (
            max(1, self.input_size[0] // (2 * FEATURE_STRIDE)),
            max(1, self.input_size[1] // (2 * FEATURE_STRIDE)),
        )
        self.exist_pool = nn.AdaptiveAvgPool2d(self.exist_grid)
        self.exist_fc1 = nn.Linear((1 + num_lanes) * self.exist_grid[0] * self.exist_grid[1], exist_hidden)
        self.exist_fc2 = nn.Linear(exist_hidden, num_lanes)
        _init_weights(self)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, w = x.shape[-2:]
        if not torch.jit.is_tracing():  # shapes are fixed in a traced/exported graph
            if x.dim() != 4 or x.shape[1] != 3:
                raise ValueError(f"SCNN expects images shaped [N, 3, H, W], got {tuple(x.shape)}")
            if h % FEATURE_STRIDE or w % FEATURE_STRIDE:
                raise ValueError(f"SCNN input height and width must be multiples of 8, got {h}x{w}")
        feats = self.message_passing(self.backbone(x))
        seg = self.seg_head(self.dropout(feats))
        prob = F.softmax(seg, dim=1)
        exist = self.exist_fc2(F.relu(self.exist_fc1(torch.flatten(self._pool_exist(prob), 1))))
        seg = F.interpolate(seg, size=(h, w), mode="bilinear", align_corners=False)
        return seg, exist


    def _pool_exist(self, prob: torch.Tensor) -> torch.Tensor:
        """Pool the lane probabilities onto the existence grid.

        Where the map divides evenly (every size the paper uses: 36x100 -> 18x50) this is a
        plain average pool, whose CUDA backward has no atomics, so ``--deterministic`` holds on
        a GPU; ``AdaptiveAvgPool2d``'s backward is nondeterministic there. Same values either way.
        """
        fh, fw = prob.shape[-2:]
        gh, gw = self.exist_grid
        if fh % gh == 0 and fw % gw == 0:
            return F.avg_pool2d(prob, (fh // gh, fw // gw))
        return self.exist_pool(prob)


def _check_size(size: object, name: str) -> None:
    ok = (
        isinstance(size, (tuple, list))
        and len(size) == 2
        and all(isinstance(v, int) and v > 0 and v % FEATURE_STRIDE == 0 for v in size)
    )
    if not ok:
        raise ValueError(f"{name} must be (height, width), positive multiples of 8, got {size!r}")


def _init_weights(model: SCNN) -> None:
    """Kaiming for convs (random init, nothing downloaded); message passing keeps its own."""
    mp = set(model.message_passing.modules())
    for m in model.modules():
        if m in mp:
            continue
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5))
            nn.init.zeros_(m.bias)
    # fan_out with only 1 + num_lanes outputs would give logits with std ~10 at init (a loss
    # of ~20 and unstable first steps); fan_in keeps them O(1).
    nn.init.kaiming_normal_(model.seg_head.weight, mode="fan_in", nonlinearity="linear")


def load_weights(model: nn.Module, weights: str | os.PathLike[str]) -> nn.Module:
    """Load a local weights file: a ``state_dict`` or ``{"model": state_dict}``; never downloads.

    A ``module.`` prefix (DDP / DataParallel checkpoints) is stripped. Errors name the file.
    """
    path = Path(weights).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"weights file not found: {str(path)!r} (a local .pt file with a state_dict or "
            "{'model': state_dict}; nothing is downloaded)"
        )
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt / not a torch file
        raise ValueError(f"cannot read weights file {str(path)!r}: {type(exc).__name__}: {exc}") from exc
    state = obj.get("model", obj) if isinstance(obj, Mapping) else None
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(
            f"weights file {str(path)!r} holds {type(obj).__name__}, expected a state_dict "
            "(name -> tensor) or a dict with a 'model' state_dict"
        )
    state = {k[len("module.") :] if k.startswith("module.") else k: v for k, v in state.items()}
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    mismatched = [
        f"{k} {tuple(state[k].shape)} != {tuple(own[k].shape)}"
        for k in own
        if k in state and state[k].shape != own[k].shape
    ]
    if missing or unexpected or mismatched:
        parts = []
        for label, items in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", mismatched)):
            if items:
                more = f" (+{len(items) - 5} more)" if len(items) > 5 else ""
                parts.append(f"{label}: {', '.join(items[:5])}{more}")
        raise ValueError(
            f"weights file {str(path)!r} does not fit this model ({'; '.join(parts)}); "
            "was it saved for another backbone, num_lanes or input_size?"
        )
    model.load_state_dict(state)
    return model


def _finish(model: SCNN, weights: str | os.PathLike[str] | None) -> SCNN:
    if weights is not None:
        load_weights(model, weights)
    return model


# The builders below are the model registry's entries (lanenb_trainer/model_registry.py names
# them by "module:function" so that the backbone list needs no torch). Each takes the same
# keyword arguments:
_BUILDER_ARGS = """
    Args:
        num_lanes: lane slots; the segmentation head has ``1 + num_lanes`` classes (background
            first) and the existence head ``num_lanes`` logits.
        weights: a local ``.pt`` file with a ``state_dict`` (or ``{"model": state_dict}``) for
            this very model; nothing is downloaded.
        **kwargs: to :class:`SCNN`: ``input_size`` (height, width; multiples of 8, default
            288x800), ``mp_kernel`` (9), ``dropout`` (0.1), ``exist_hidden`` (128).

    Returns:
        An :class:`SCNN` in training mode: ``model(x) -> (seg_logits, exist_logits)``.

    Raises:
        ValueError: a bad size or argument, or ``weights`` that do not fit the model.
        FileNotFoundError: ``weights`` names no file.
"""


def _documented(builder: Callable[..., SCNN]) -> Callable[..., SCNN]:
    """Append the shared Args/Returns/Raises to a builder's docstring (what Shift-Tab shows)."""
    builder.__doc__ = (builder.__doc__ or "") + "\n" + _BUILDER_ARGS
    return builder


@_documented
def scnn_small(
    *, num_lanes: int = 4, weights: str | os.PathLike[str] | None = None, width: int = 16, **kwargs
) -> SCNN:
    """SCNN on the small CPU backbone (``width`` channels in the first layer, default 16): the
    model that trains in minutes on a laptop; no ImageNet layout."""
    return _finish(SCNN(small_backbone(128, width), num_lanes=num_lanes, **kwargs), weights)


@_documented
def scnn_vgg16(*, num_lanes: int = 4, weights: str | os.PathLike[str] | None = None, **kwargs) -> SCNN:
    """The paper's model: dilated VGG16-BN backbone (~20M parameters at 288x800); takes
    torchvision's ``vgg16_bn`` ImageNet weights (``--backbone-weights``)."""
    return _finish(SCNN(vgg16_dilated(128), num_lanes=num_lanes, **kwargs), weights)


@_documented
def scnn_resnet18(*, num_lanes: int = 4, weights: str | os.PathLike[str] | None = None, **kwargs) -> SCNN:
    """SCNN on a dilated ResNet-18 (layer3/layer4 dilated, stride 8); takes torchvision's
    ``resnet18`` ImageNet weights (``--backbone-weights``)."""
    return _finish(SCNN(resnet18_dilated(128), num_lanes=num_lanes, **kwargs), weights)


@_documented
def scnn_resnet34(*, num_lanes: int = 4, weights: str | os.PathLike[str] | None = None, **kwargs) -> SCNN:
    """SCNN on a dilated ResNet-34 (layer3/layer4 dilated, stride 8); takes torchvision's
    ``resnet34`` ImageNet weights (``--backbone-weights``)."""
    return _finish(SCNN(resnet34_dilated(128), num_lanes=num_lanes, **kwargs), weights)


def build_model(
    backbone: str = "small",
    *,
    num_lanes: int = 4,
    weights: str | os.PathLike[str] | None = None,
    **kwargs,
) -> SCNN:
    """SCNN with the named backbone (``list_models()``: small, vgg16, resnet18, resnet34);
    ``kwargs`` go to the builder/``SCNN``.

    Raises:
        ValueError: an unknown backbone (the message lists them), or a bad builder argument.
    """
    return get_model_builder(backbone)(num_lanes=num_lanes, weights=weights, **kwargs)


def build_from_checkpoint(path: str | os.PathLike[str]) -> tuple[SCNN, dict]:
    """The model a trainer checkpoint (``last.pt``/``best.pt``) holds, built with the
    constructor arguments stored in it (backbone, lanes, input size), in eval mode.

    Returns ``(model, model_args)``. Loads with ``weights_only=True``: a checkpoint on a shared
    volume cannot run code. Older checkpoints without ``model_args`` use their ``config``.

    Raises:
        FileNotFoundError: no such file. ValueError: not a lanenb checkpoint or state dict.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {str(path)!r}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"cannot read checkpoint {str(path)!r}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(state, Mapping) or not isinstance(state.get("model"), Mapping):
        raise ValueError(f"{str(path)!r} is not a lanenb training checkpoint (no 'model' state dict); "
                         "for a bare state dict use build_model(backbone, input_size=..., weights=...)")
    args = state.get("model_args")
    if not args:
        cfg = state.get("config") or {}
        args = {"backbone": cfg.get("backbone", "small"), "num_lanes": 4,
                "input_size": [cfg.get("img_height", 288), cfg.get("img_width", 800)]}
    args = {"backbone": args["backbone"], "num_lanes": int(args["num_lanes"]),
            "input_size": [int(v) for v in args["input_size"]]}
    weights = {k[len("module."):] if k.startswith("module.") else k: v for k, v in state["model"].items()}
    # trainers before model_args built every model at 288x800 whatever the image size
    sizes = [args["input_size"]] + ([] if state.get("model_args") else [[288, 800]])
    for size in sizes:
        model = build_model(args["backbone"], num_lanes=args["num_lanes"], input_size=tuple(size))
        try:
            model.load_state_dict(weights)
        except RuntimeError as exc:
            error = exc
            continue
        return model.eval(), {**args, "input_size": list(args["input_size"]), "built_at": list(size)}
    raise ValueError(f"checkpoint {str(path)!r} does not fit a {args['backbone']} SCNN at "
                     f"{args['input_size']}: {error}") from None
