"""Dilated ResNet-18/34 backbones for SCNN: layer3/layer4 dilated (2, 4) to keep stride 8.

Same block structure as torchvision's BasicBlock ResNets (so their ImageNet weights map
onto it key for key) with ``replace_stride_with_dilation=[False, True, True]``, then a 1x1
conv to the 128 channels the message passing runs on.
"""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["BasicBlock", "ResNetDilated", "resnet18_dilated", "resnet34_dilated"]


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, cout: int, stride: int = 1, dilation: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, padding=dilation, dilation=dilation, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, padding=dilation, dilation=dilation, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNetDilated(nn.Module):
    """``[N, 3, H, W] -> [N, out_channels, H/8, W/8]``."""

    stride = 8

    def __init__(self, blocks: tuple[int, int, int, int], out_channels: int = 128) -> None:
        super().__init__()
        if len(blocks) != 4 or any(b < 1 for b in blocks):
            raise ValueError(f"blocks must be four positive counts, got {blocks}")
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(64, 64, blocks[0], stride=1, dilation=1)
        self.layer2 = self._make_layer(64, 128, blocks[1], stride=2, dilation=1)
        self.layer3 = self._make_layer(128, 256, blocks[2], stride=1, dilation=2)
        self.layer4 = self._make_layer(256, 512, blocks[3], stride=1, dilation=4)
        self.reduce = nn.Sequential(
            nn.Conv2d(512, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )
        self.out_channels = out_channels

    @staticmethod
    def _make_layer(cin: int, cout: int, n: int, stride: int, dilation: int) -> nn.Sequential:
        # torchvision dilates the first block of a dilated stage by the previous dilation.
        first = BasicBlock(cin, cout, stride, max(1, dilation // 2))
        return nn.Sequential(first, *[BasicBlock(cout, cout, 1, dilation) for _ in range(n - 1)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.reduce(x)


def resnet18_dilated(out_channels: int = 128) -> ResNetDilated:
    return ResNetDilated((2, 2, 2, 2), out_channels)


def resnet34_dilated(out_channels: int = 128) -> ResNetDilated:
    return ResNetDilated((3, 4, 6, 3), out_channels)
