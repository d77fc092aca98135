"""Seeded training augmentation, composed so that each frame costs one warp and one colour pass.

Unrotated frames (half of them by default, ``rotate_p``) skip the warp: their matrix is
axis-aligned, so a crop of the decoded frame + ``cv2.resize`` (+ flip) does the same job at
about half the cost, and the lane points go through that crop's exact matrix
(:func:`crop_resize_window`).

Geometry (resize to the network input, random scale/crop, small rotation, horizontal flip)
is a single 2x3 affine matrix: the decoded frame goes through one ``cv2.warpAffine`` (rotated
frames) or one crop + ``cv2.resize`` (the others) and the lane points through that same
matrix, so image and mask can never disagree. Colour jitter
(brightness, contrast, saturation), BGR->RGB and ImageNet normalisation are one 3x4 colour
matrix applied with ``cv2.transform``. Contrast pivots on mid-grey (128) rather than the
frame's mean and nothing is clipped - both keep the colour step linear and cheap.

Parameters come from ``numpy.random.default_rng([seed, epoch, index])``, so a frame's
augmentation depends only on (seed, epoch, index): not on worker count, rank or order.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported where it is used, so importing this module stays cheap
    import torch

__all__ = [
    "AugmentConfig",
    "AugmentParams",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "sample_params",
    "affine_matrix",
    "colour_matrix",
    "apply_affine",
    "crop_resize_window",
    "apply_colour",
    "apply_colour_uint8",
    "drop_pad_channel",
    "normalize_images",
    "frame_rng",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # RGB
IMAGENET_STD = (0.229, 0.224, 0.225)
_LUMA_BGR = np.array([0.114, 0.587, 0.299])


@dataclass(frozen=True)
class AugmentConfig:
    scale: tuple[float, float] = (1.0, 1.15)  # zoom in; the crop stays inside the frame
    max_rotate_deg: float = 3.0
    rotate_p: float = 0.5  # unrotated frames take the cheap crop + resize path
    flip_p: float = 0.5
    brightness: float = 0.3
    contrast: float = 0.3
    saturation: float = 0.3

    def __post_init__(self) -> None:
        lo, hi = self.scale
        if not 0 < lo <= hi:
            raise ValueError(f"scale range must satisfy 0 < lo <= hi; got {self.scale}")
        for name in ("flip_p", "rotate_p"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1]; got {getattr(self, name)}")
        for name in ("max_rotate_deg", "brightness", "contrast", "saturation"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0; got {getattr(self, name)}")


@dataclass(frozen=True)
class AugmentParams:
    scale: float = 1.0
    shift_x: float = 0.0  # crop-centre offset as a fraction of the output size
    shift_y: float = 0.0
    angle_deg: float = 0.0
    flip: bool = False
    brightness: float = 1.0
    contrast: float = 1.0
    saturation: float = 1.0


def frame_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(epoch), int(index)])


def sample_params(rng: np.random.Generator, cfg: AugmentConfig = AugmentConfig()) -> AugmentParams:
    s = float(rng.uniform(*cfg.scale))
    slack = max(0.0, (s - 1.0) / 2.0)  # how far the crop centre may move and stay inside
    params = AugmentParams(
        scale=s,
        shift_x=float(rng.uniform(-slack, slack)),
        shift_y=float(rng.uniform(-slack, slack)),
        angle_deg=float(rng.uniform(-cfg.max_rotate_deg, cfg.max_rotate_deg)),
        flip=bool(rng.random() < cfg.flip_p),
        brightness=float(rng.uniform(1 - cfg.brightness, 1 + cfg.brightness)),
        contrast=float(rng.uniform(1 - cfg.contrast, 1 + cfg.contrast)),
        saturation=float(rng.uniform(1 - cfg.saturation, 1 + cfg.saturation)),
    )
    if rng.random() >= cfg.rotate_p:
        params = dataclasses.replace(params, angle_deg=0.0)
    return params


def affine_matrix(src_hw: tuple[int, int], out_hw: tuple[int, int],
                  params: AugmentParams | None = None) -> np.ndarray:
    """2x3 float64 matrix mapping source pixel coords to output pixel coords (pixel centres)."""
    (h, w), (oh, ow) = src_hw, out_hw
    sx, sy = ow / w, oh / h
    # resize with pixel-centre alignment: x' = (x + .5) * s - .5
    m = np.array([[sx, 0, 0.5 * sx - 0.5], [0, sy, 0.5 * sy - 0.5], [0, 0, 1]], np.float64)
    if params is not None:
        cx, cy = (ow - 1) / 2.0, (oh - 1) / 2.0
        a = math.radians(params.angle_deg)
        c, s = math.cos(a) * params.scale, math.sin(a) * params.scale
        # zoom + rotate about the output centre, then move the crop window
        aug = np.array([
            [c, -s, cx - c * cx + s * cy - params.shift_x * ow],
            [s, c, cy - s * cx - c * cy - params.shift_y * oh],
            [0, 0, 1],
        ])
        m = aug @ m
        if params.flip:
            m = np.array([[-1, 0, ow - 1], [0, 1, 0], [0, 0, 1]], np.float64) @ m
    return m[:2]


def crop_resize_window(m: np.ndarray, src_hw: tuple[int, int], out_hw: tuple[int, int]
                       ) -> tuple[tuple[int, int, int, int], np.ndarray] | None:
    """For an axis-aligned ``m`` (no rotation): the integer source window ``(x0, y0, x1, y1)``
    whose plain ``cv2.resize`` (then a horizontal flip if ``m`` mirrors) approximates the warp,
    and the exact matrix of that crop + resize for the lane points; None if ``m`` rotates or
    the window leaves the frame. Why: ``cv2.resize`` costs about half of ``cv2.warpAffine``
    on 3-channel frames, and most augmented frames are not rotated.
    """
    if abs(m[0, 1]) > 1e-12 or abs(m[1, 0]) > 1e-12 or m[0, 0] == 0 or m[1, 1] <= 0:
        return None
    (h, w), (oh, ow) = src_hw, out_hw
    flip = m[0, 0] < 0
    # source coordinates of the output's outer pixel edges (-.5 and size - .5)
    xs = sorted(((-0.5 - m[0, 2]) / m[0, 0], (ow - 0.5 - m[0, 2]) / m[0, 0]))
    ys = ((-0.5 - m[1, 2]) / m[1, 1], (oh - 0.5 - m[1, 2]) / m[1, 1])
    x0, x1 = int(round(xs[0] + 0.5)), int(round(xs[1] + 0.5))
    y0, y1 = int(round(ys[0] + 0.5)), int(round(ys[1] + 0.5))
    if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
        return None
    sx, sy = ow / (x1 - x0), oh / (y1 - y0)
    eff = np.array([[sx, 0.0, (0.5 - x0) * sx - 0.5], [0.0, sy, (0.5 - y0) * sy - 0.5]])
    if flip:
        eff[0] = -eff[0]
        eff[0, 2] += ow - 1
    return (x0, y0, x1, y1), eff


def apply_affine(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Transform (N, 2) points with a 2x3 matrix."""
    return pts @ m[:, :2].T + m[:, 2]


def colour_matrix(params: AugmentParams | None = None,
                  mean: tuple[float, float, float] = IMAGENET_MEAN,
                  std: tuple[float, float, float] = IMAGENET_STD, *,
                  normalise: bool = True) -> np.ndarray:
    """3x4 float32 matrix: BGR uint8 values -> jittered RGB, ImageNet-normalised unless
    ``normalise=False`` (then in 0..255 pixel units, for the uint8 path)."""
    lin = np.eye(3)
    off = np.zeros(3)
    if params is not None:
        sat = params.saturation * np.eye(3) + (1 - params.saturation) * np.outer(np.ones(3), _LUMA_BGR)
        lin = params.contrast * sat * params.brightness
        off = np.full(3, 128.0 * (1 - params.contrast))
    lin, off = lin[::-1], off[::-1]  # output rows in RGB order
    if not normalise:
        return np.concatenate([lin, off[:, None]], axis=1).astype(np.float32)
    mean_a, std_a = np.asarray(mean), np.asarray(std)
    lin = lin / (255.0 * std_a[:, None])
    off = (off / 255.0 - mean_a) / std_a
    return np.concatenate([lin, off[:, None]], axis=1).astype(np.float32)


def apply_colour(bgr: np.ndarray, matrix: np.ndarray) -> torch.Tensor:
    """uint8 HxWx3 BGR -> float32 3xHxW tensor via a 3x4 colour matrix, in one matmul.

    The matmul writes channel-first memory directly, so no HWC->CHW copy follows.
    """
    import torch

    h, w = bgr.shape[:2]
    pix = torch.from_numpy(np.ascontiguousarray(bgr)).view(h * w, 3).float()
    mat = torch.from_numpy(np.ascontiguousarray(matrix[:, :3]))
    off = torch.from_numpy(np.ascontiguousarray(matrix[:, 3:]))
    return torch.addmm(off, mat, pix.T).view(3, h, w)


def apply_colour_uint8(bgr: np.ndarray, matrix: np.ndarray) -> torch.Tensor:
    """uint8 HxWx3 BGR -> uint8 3xHxW RGB, jitter applied (saturating), in one ``cv2.transform``.

    Loader workers ship uint8: a quarter of the bytes of float32 and no per-pixel float work on
    the CPU; :func:`normalize_images` finishes the job once per batch, on the model's device.
    """
    import cv2
    import torch

    rgb = cv2.transform(bgr, matrix)
    return torch.from_numpy(rgb).permute(2, 0, 1)


def drop_pad_channel(img: np.ndarray) -> np.ndarray:
    """BGRX (4 channels, as the loader decodes for OpenCV's 4-channel SIMD geometry) -> BGR;
    3-channel frames pass through. Done after the resize/warp, on the small output."""
    import cv2

    return cv2.cvtColor(img, cv2.COLOR_BGRA2BGR) if img.ndim == 3 and img.shape[2] == 4 else img


def prepare_frame(bgr: np.ndarray, out_hw: tuple[int, int]) -> torch.Tensor:
    """An unaugmented frame as the network sees it: uint8 3xHxW RGB at ``out_hw``.

    The evaluation path of ``TuSimpleDataset`` (no augmentation: a plain resize) and
    ``lanenb predict`` both call this, so a model sees the same pixels in both;
    :func:`normalize_images` follows on the batch.
    """
    import cv2

    oh, ow = out_hw
    warped = drop_pad_channel(cv2.resize(bgr, (ow, oh), interpolation=cv2.INTER_LINEAR))
    return apply_colour_uint8(warped, colour_matrix(None, normalise=False))


def normalize_images(images: torch.Tensor, mean: tuple[float, float, float] = IMAGENET_MEAN,
                     std: tuple[float, float, float] = IMAGENET_STD) -> torch.Tensor:
    """uint8 [N,3,H,W] RGB batch -> ImageNet-normalised float32, on the batch's device."""
    import torch

    if images.dtype != torch.uint8:
        raise TypeError(f"normalize_images expects a uint8 batch, got {images.dtype}")
    m = torch.tensor(mean, dtype=torch.float32, device=images.device).view(1, 3, 1, 1) * 255.0
    s = torch.tensor(std, dtype=torch.float32, device=images.device).view(1, 3, 1, 1) * 255.0
    return (images.float() - m) / s
