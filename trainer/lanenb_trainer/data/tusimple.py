"""``TuSimpleDataset``: frames of a TuSimple root as SCNN training samples.

A sample is ``{"image": float32[3,H,W] (ImageNet-normalised RGB), "mask": int64[H,W]
(0 background, 1..4 lane slots, see :mod:`.masks`), "exist": float32[4], "index": int}``;
with ``normalize=False`` (what the trainer's loader workers use) image and mask are uint8.

Per frame: decode the JPEG (with ``simplejpeg`` when installed - the same libjpeg-turbo with
SIMD - as BGRX into a reusable per-thread buffer, see ``_frame_buffer``; or at 1/2, 1/4 or
1/8 scale straight from the DCT when that is still at least the output size); then the
geometry, on 4 channels where OpenCV has SIMD paths: a crop + ``cv2.resize`` (+ flip) for
unrotated frames, one ``cv2.warpAffine`` for rotated ones (see :mod:`.augment`); the pad
channel is dropped at output size; lanes drawn at output resolution through the same
(exact) matrix; one ``cv2.transform`` for colour jitter.
Augmentation is drawn from (seed, epoch, index); the sampler of :func:`.loader.build_loader`
hands ``(epoch, index)`` pairs to the workers, so persistent workers follow the epoch too.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from .augment import (
    AugmentConfig,
    affine_matrix,
    apply_affine,
    apply_colour,
    apply_colour_uint8,
    colour_matrix,
    crop_resize_window,
    drop_pad_channel,
    frame_rng,
    prepare_frame,
    sample_params,
)
from .labels import LabelError, LaneRecord, Problem, load_image
from .masks import assign_slots, default_thickness, existence_from_points, lane_runs, mirror_slots, render_mask
from .splits import load_split

try:  # libjpeg-turbo with SIMD, about 2x faster than cv2.imread on the same JPEG
    import simplejpeg as _simplejpeg
except ImportError:  # pragma: no cover - optional speed-up
    _simplejpeg = None

__all__ = ["TuSimpleDataset", "read_image_size"]

_REDUCED = ((8, cv2.IMREAD_REDUCED_COLOR_8), (4, cv2.IMREAD_REDUCED_COLOR_4),
            (2, cv2.IMREAD_REDUCED_COLOR_2))


def read_image_size(path: str | os.PathLike) -> tuple[int, int] | None:
    """(h, w) from a JPEG/PNG header without decoding; ``None`` if the header is not understood."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            if head == b"\x89P":
                rest = fh.read(22)
                w, h = struct.unpack(">II", rest[14:22])
                return int(h), int(w)
            if head != b"\xff\xd8":
                return None
            while True:
                marker = fh.read(2)
                if len(marker) < 2 or marker[0] != 0xFF:
                    return None
                code = marker[1]
                if code in (0xD8, 0x01) or 0xD0 <= code <= 0xD7:
                    continue
                seg = fh.read(2)
                if len(seg) < 2:
                    return None
                length = struct.unpack(">H", seg)[0]
                if 0xC0 <= code <= 0xCF and code not in (0xC4, 0xC8, 0xCC):
                    data = fh.read(5)
                    h, w = struct.unpack(">HH", data[1:5])
                    return int(h), int(w)
                fh.seek(length - 2, os.SEEK_CUR)
    except (OSError, struct.error):
        return None


class TuSimpleDataset(Dataset):
    """One split (``train``/``val``/``test``) of a TuSimple root; see the module docstring.

    ``max_upscale`` > 1 lets the decoder work at 1/2 (1/4, 1/8) resolution when the warp
    then upsamples by at most that factor: 1.25 decodes 1280x720 frames at 640x360 for a
    288x800 input, about 2x faster per frame for slightly softer images. The default 1.0
    never decodes below the output resolution.

    ``normalize=False`` returns the image as uint8 RGB and the mask as uint8: the training
    loop uses it so workers move a quarter of the bytes and skip all per-pixel float work;
    it then calls :func:`~lanenb_trainer.data.augment.normalize_images` on the device.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        split: str = "train",
        *,
        size: tuple[int, int] = (288, 800),
        augment: bool = False,
        seed: int = 0,
        val_fraction: float = 0.1,
        skip_invalid: bool = False,
        augment_config: AugmentConfig | None = None,
        thickness: int | None = None,
        max_upscale: float = 1.0,
        normalize: bool = True,
    ) -> None:
        if (len(size) != 2 or not all(isinstance(v, int) and v > 0 for v in size)):
            raise ValueError(f"size must be (height, width) positive integers; got {size!r}")
        if not 1.0 <= max_upscale <= 2.0:
            raise ValueError(f"max_upscale must be in [1, 2]; got {max_upscale}")
        self.max_upscale = float(max_upscale)
        self.normalize = bool(normalize)
        self.root = Path(root)
        self.split = split
        self.size = (int(size[0]), int(size[1]))
        self.augment = bool(augment)
        self.seed = int(seed)
        self.augment_config = augment_config or AugmentConfig()
        self.thickness = default_thickness(self.size[1]) if thickness is None else int(thickness)
        self.problems: list[Problem] = []
        self.records: list[LaneRecord] = self._load_records(val_fraction, skip_invalid)
        self._sizes: list[tuple[int, int] | None] = [None] * len(self.records)
        self._slots: list[list[int] | None] = [None] * len(self.records)  # labels only: cache
        # each lane's runs of labelled points, per frame (pure functions of the label: cached,
        # since tiny-array numpy work per item measured ~0.2 ms of a ~3.5 ms item)
        self._runs: list[list[list[np.ndarray]] | None] = [None] * len(self.records)
        self.epoch = 0
        self._local = threading.local()

    def _load_records(self, val_fraction: float, skip_invalid: bool) -> list[LaneRecord]:
        """The split's frames (a subclass reads another layout: ``CULaneDataset``)."""
        return load_split(self.root, self.split, val_fraction=val_fraction, skip_invalid=skip_invalid,
                          problems=self.problems)

    def __len__(self) -> int:
        return len(self.records)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def image_path(self, i: int) -> Path:
        return self.root / self.records[i].raw_file

    def image_size(self, i: int) -> tuple[int, int]:
        """(h, w) of the original frame, read from the file header (cached)."""
        cached = self._sizes[i]
        if cached is None:
            cached = read_image_size(self.image_path(i))
            if cached is None:
                cached = self._load(i)[0].shape[:2]
            self._sizes[i] = cached = (int(cached[0]), int(cached[1]))
        return cached

    def _frame_buffer(self, data: bytes) -> np.ndarray | None:
        """This thread's reusable decode buffer for ``data``'s frame as BGRX, placed 16 bytes
        past a 64-byte boundary.

        Why the odd placement: libjpeg-turbo's SIMD colour conversion writes rows that start
        on a 32-byte boundary with non-temporal stores, which bypass the cache, so the resize
        or warp that reads the frame next fetches all of it from DRAM again. From an unaligned
        buffer the frame stays in cache: decode + warpAffine measured 1.8 ms instead of 3.1 ms,
        decode + resize 1.7 instead of 1.9 (``bench/data_pipeline.py``; decode alone is
        unchanged). Reusing one buffer also saves the page faults of a fresh 3.7 MB array.
        """
        try:
            h, w = _simplejpeg.decode_jpeg_header(data)[:2]
        except ValueError:
            return None  # decode_jpeg reports the problem
        need = h * w * 4
        buf = getattr(self._local, "frame", None)
        if buf is None or buf.size < need:
            raw = np.empty(need + 128, np.uint8)
            start = (16 - raw.ctypes.data) % 64
            buf = self._local.frame = raw[start:start + need]
        return buf[:need]

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["_local"]  # per-thread scratch (decode buffers): not sent to workers
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    def _load(self, i: int, reduce: int = 1) -> tuple[np.ndarray, int]:
        path = self.image_path(i)
        if reduce == 1 and _simplejpeg is not None:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
                if data[:2] == b"\xff\xd8":
                    # BGRX: OpenCV's resize and warpAffine have SIMD paths for 4 channels
                    # (warpAffine ~2x faster than on 3); the pad byte goes at output size.
                    # fastupsample (chroma by replication, 11% faster): after the resize to
                    # the network input it moves pixels by 0.02-0.06 levels on average.
                    return _simplejpeg.decode_jpeg(data, "BGRX", fastupsample=True,
                                                   buffer=self._frame_buffer(data)), 1
            except (OSError, ValueError):
                pass  # let OpenCV decode it or produce the precise error below
        flag = dict(_REDUCED).get(reduce, cv2.IMREAD_COLOR)
        rec = self.records[i]
        try:
            return load_image(path, flag), reduce
        except (FileNotFoundError, ValueError) as exc:
            raise LabelError(Problem(rec.source, rec.line, str(exc))) from None

    def _decode(self, i: int) -> tuple[np.ndarray, tuple[int, int], float]:
        """Decoded BGR frame, original (h, w), and source-pixels-per-decoded-pixel factor."""
        hw = self._sizes[i] or read_image_size(self.image_path(i))
        oh, ow = self.size
        if hw is not None:
            self._sizes[i] = hw
            need = (self.augment_config.scale[0] if self.augment else 1.0) / self.max_upscale
            for factor, _ in _REDUCED:
                # keep at least output resolution (after the smallest zoom) in both axes,
                # or 1/max_upscale of it when the caller trades sharpness for speed
                if hw[0] / factor >= oh * need and hw[1] / factor >= ow * need:
                    img, _ = self._load(i, factor)
                    return img, hw, hw[1] / img.shape[1]
        img, _ = self._load(i)
        hw = (int(img.shape[0]), int(img.shape[1]))
        self._sizes[i] = hw
        return img, hw, 1.0

    def __getitem__(self, item: int | tuple[int, int]) -> dict[str, Any]:
        epoch, i = item if isinstance(item, tuple) else (self.epoch, item)
        i = int(i)
        if not -len(self) <= i < len(self):
            raise IndexError(f"index {i} out of range for {len(self)} frames")
        i %= len(self)
        rec = self.records[i]
        img, (h, w), factor = self._decode(i)
        params = sample_params(frame_rng(self.seed, epoch, i), self.augment_config) \
            if self.augment else None
        oh, ow = self.size
        m = affine_matrix((h, w), (oh, ow), params)
        window = crop_resize_window(m, (h, w), (oh, ow)) if factor == 1.0 else None
        image = None
        if window is not None and params is None and not self.normalize:
            # evaluation frames (the trainer's uint8 path): the one function lanenb predict uses
            (x0, y0, x1, y1), m = window
            image = prepare_frame(img[y0:y1, x0:x1], (oh, ow))
        elif window is not None:  # no rotation: crop + resize (+ flip), lanes through its exact matrix
            (x0, y0, x1, y1), m = window
            warped = cv2.resize(img[y0:y1, x0:x1], (ow, oh), interpolation=cv2.INTER_LINEAR)
            if m[0, 0] < 0:
                warped = cv2.flip(warped, 1)
        else:
            # decoded pixel j is centred on source coordinate (j + .5) * factor - .5
            to_src = np.array([[factor, 0, 0.5 * factor - 0.5], [0, factor, 0.5 * factor - 0.5],
                               [0, 0, 1]])
            m_img = (np.vstack([m, [0, 0, 1]]) @ to_src)[:2]
            warped = cv2.warpAffine(img, m_img, (ow, oh), flags=cv2.INTER_LINEAR,
                                    borderMode=cv2.BORDER_CONSTANT)
        if image is None:
            warped = drop_pad_channel(warped)
            image = (apply_colour(warped, colour_matrix(params)) if self.normalize
                     else apply_colour_uint8(warped, colour_matrix(params, normalise=False)))

        slots = self._slots[i]
        if slots is None:
            slots = self._slots[i] = assign_slots(rec.lanes, rec.h_samples, w, h)
        if params is not None and params.flip:
            slots = mirror_slots(slots)
        lanes = self._runs[i]
        if lanes is None:
            lanes = self._runs[i] = [lane_runs(lane, rec.h_samples) for lane in rec.lanes]
        runs = [(s, [apply_affine(m, r) for r in lane]) for s, lane in zip(slots, lanes) if s >= 0]
        mask = render_mask(runs, oh, ow, self.thickness)
        return {
            "image": image,
            "mask": torch.from_numpy(mask).long() if self.normalize else torch.from_numpy(mask),
            "exist": torch.from_numpy(existence_from_points(runs, oh, ow, self.thickness)),
            "index": i,
        }

    def __repr__(self) -> str:
        return (f"TuSimpleDataset(root={str(self.root)!r}, split={self.split!r}, "
                f"frames={len(self)}, size={self.size}, augment={self.augment})")
