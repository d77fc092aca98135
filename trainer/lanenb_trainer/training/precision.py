"""How a rank computes: autocast dtype, loss scaler and memory format, from the config and
the rank's device, decided once so training, evaluation and the start event agree.

Why one object: the training step, the evaluation loop, the loss scaler and the ``start``
event each asked "is AMP on?" separately; with two AMP types (float16 needs a loss scaler,
bfloat16 does not) and an optional channels-last layout, four places deciding alone would
drift apart.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from lanenb_trainer.config import TrainConfig

__all__ = ["Precision", "configure_algorithms", "resolve_precision"]

_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
_SHORT = {torch.float16: "fp16", torch.bfloat16: "bf16", None: "fp32"}


@dataclass(frozen=True)
class Precision:
    """What one rank runs in.

    Attributes:
        device_type: ``cuda`` or ``cpu``.
        dtype: the autocast type, or None without AMP (float32 throughout).
        channels_last: NHWC model weights and batches.
    """

    device_type: str
    dtype: torch.dtype | None
    channels_last: bool = False

    @property
    def amp(self) -> bool:
        return self.dtype is not None

    @property
    def name(self) -> str:
        """``fp16``, ``bf16`` or ``fp32``: what the start event and the views show."""
        return _SHORT[self.dtype]

    def autocast(self) -> Any:
        """The forward pass's context: autocast in :attr:`dtype`, or nothing."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def scaler(self) -> torch.amp.GradScaler | None:
        """A loss scaler for float16 (its narrow exponent underflows small gradients); None
        for bfloat16 (float32's exponent range) and float32."""
        if self.dtype is torch.float16:
            return torch.amp.GradScaler(self.device_type)
        return None

    def model(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model in this memory format (in place; returns it)."""
        if self.channels_last:
            model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # documented, untyped
        return model

    def batch(self, images: torch.Tensor) -> torch.Tensor:
        """A batch of images in this memory format."""
        if self.channels_last and images.dim() == 4:
            return images.contiguous(memory_format=torch.channels_last)
        return images

    def describe(self) -> dict[str, Any]:
        return {"amp": self.amp, "precision": self.name, "channels_last": self.channels_last}


def configure_algorithms(deterministic: bool) -> None:
    """``--deterministic``: deterministic kernels everywhere (cuBLAS's fixed workspace,
    cuDNN's deterministic algorithms, no autotuning), so the same checkpoint and data give
    the same weights; ops without a deterministic kernel warn instead of failing the run.
    Otherwise cuDNN autotunes each convolution shape once (the input size is fixed, so the
    search pays for itself within a few steps). Call before the first CUDA matrix product."""
    if deterministic:
        import os

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    else:
        torch.backends.cudnn.benchmark = True


def resolve_precision(cfg: TrainConfig, device: torch.device) -> Precision:
    """``--amp``/``--amp-dtype``/``--channels-last`` on ``device`` (``--channels-last`` unset: on
    for a GPU rank).

    float16 autocast runs on GPUs only (CPU autocast has no float16 path), so ``--amp`` with
    the default float16 means float32 on a CPU rank, as before. bfloat16 runs on both.

    Raises:
        ValueError: ``--amp-dtype bfloat16`` on a GPU without bfloat16 support (before Ampere).
    """
    dtype = _DTYPES[cfg.amp_dtype] if cfg.amp else None
    if dtype is torch.float16 and device.type != "cuda":
        dtype = None
    if dtype is torch.bfloat16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"--amp-dtype bfloat16: {torch.cuda.get_device_name(device)} has no bfloat16 "
                         "support; use --amp-dtype float16")
    # unset: NHWC on GPUs, where cuDNN's fastest kernels want it; NCHW on CPUs, where oneDNN
    # gains little here and the Winograd message passing packs its own layout
    channels_last = device.type == "cuda" if cfg.channels_last is None else bool(cfg.channels_last)
    return Precision(device.type, dtype, channels_last)
