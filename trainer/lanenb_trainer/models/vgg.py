"""Dilated VGG16-BN backbone of SCNN (Pan et al. 2018): stride 8, 128 output channels.

As in the paper's TuSimple model: VGG16 conv1-conv5 (with BatchNorm), pool4 and pool5
removed and conv5 dilated by 2 so the map stays at stride 8, followed by a 3x3 conv with
dilation 4 (512 -> 1024) and a 1x1 conv to the 128 channels the message passing runs on.
"""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["VGG16Dilated", "vgg16_dilated"]

# (out_channels, dilation) per conv; "M" = 2x2 max-pool. Only pool1-pool3 remain (stride 8).
_CFG: list[tuple[int, int] | str] = [
    (64, 1), (64, 1), "M",
    (128, 1), (128, 1), "M",
    (256, 1), (256, 1), (256, 1), "M",
    (512, 1), (512, 1), (512, 1),
    (512, 2), (512, 2), (512, 2),
]


def _conv_bn_relu(cin: int, cout: int, kernel: int, dilation: int = 1) -> list[nn.Module]:
    pad = dilation * (kernel // 2)
    return [
        nn.Conv2d(cin, cout, kernel, padding=pad, dilation=dilation, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    ]


class VGG16Dilated(nn.Module):
    """``[N, 3, H, W] -> [N, out_channels, H/8, W/8]``."""

    stride = 8

    def __init__(self, out_channels: int = 128) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for item in _CFG:
            if isinstance(item, str):  # "M"
                layers.append(nn.MaxPool2d(2, 2))
            else:
                cout, dilation = item
                layers += _conv_bn_relu(cin, cout, 3, dilation)
                cin = cout
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(
            *_conv_bn_relu(512, 1024, 3, dilation=4),
            *_conv_bn_relu(1024, out_channels, 1),
        )
        self.out_channels = out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def vgg16_dilated(out_channels: int = 128) -> VGG16Dilated:
    return VGG16Dilated(out_channels)
