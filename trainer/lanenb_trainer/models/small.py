"""A small, fast stride-8 backbone for CPU demos and tests (not from the paper).

Seven 3x3 conv-BN-ReLU layers (three with stride 2, the last dilated for context) and a
1x1 conv to the 128 channels the message passing runs on: ~0.15M parameters (0.77M
with SCNN's message passing and heads), trains on CPU
at 128x320 or 144x400 in minutes.
"""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["SmallBackbone", "small_backbone"]


def _cbr(cin: int, cout: int, stride: int = 1, dilation: int = 1, kernel: int = 3) -> nn.Sequential:
    pad = dilation * (kernel // 2)
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, padding=pad, dilation=dilation, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class SmallBackbone(nn.Module):
    """``[N, 3, H, W] -> [N, out_channels, H/8, W/8]``; ``width`` scales every layer."""

    stride = 8

    def __init__(self, out_channels: int = 128, width: int = 16) -> None:
        super().__init__()
        if width < 1:
            raise ValueError(f"width must be >= 1, got {width}")
        w = width
        self.features = nn.Sequential(
            _cbr(3, w, stride=2),
            _cbr(w, 2 * w, stride=2),
            _cbr(2 * w, 2 * w),
            _cbr(2 * w, 4 * w, stride=2),
            _cbr(4 * w, 4 * w),
            _cbr(4 * w, 4 * w, dilation=2),
            _cbr(4 * w, 4 * w, dilation=4),
            _cbr(4 * w, out_channels, kernel=1),
        )
        self.out_channels = out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)


def small_backbone(out_channels: int = 128, width: int = 16) -> SmallBackbone:
    return SmallBackbone(out_channels, width)
