"""Run a trained SCNN on frames: the trainer's own preprocessing and post-processing.

``Predictor(weights)`` builds the model a checkpoint describes (backbone, lanes, input size:
``models.build_from_checkpoint``), prepares frames exactly as the evaluation loader does
(``data.augment.prepare_frame`` + ``normalize_images``) and turns the outputs into TuSimple
lanes (``models.postprocess.probmaps_to_lanes``), so a prediction here equals the trainer's
test evaluation on the same frame. No Jupyter, no Kubernetes: a pod can run it too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .data.augment import normalize_images, prepare_frame
from .errors import UserError
from .models import build_from_checkpoint
from .models.postprocess import probmaps_to_lanes

__all__ = ["Prediction", "Predictor", "PredictError", "resolve_weights", "default_h_samples"]


class PredictError(UserError, ValueError):
    """Bad weights, frames or options for prediction; the message names the value."""


@dataclass
class Prediction:
    """Lanes of one frame in its own pixels: ``lanes[k][j]`` is the x at row ``h_samples[j]``
    (-2: no point), lanes left to right (SCNN slots); ``exist[k]`` is slot k's probability."""

    source: str
    lanes: list[list[int]]
    h_samples: list[int]
    exist: list[float]
    size: tuple[int, int]
    run_time_ms: float
    extra: dict = field(default_factory=dict)

    def points(self) -> list[list[tuple[int, int]]]:
        """Each lane as ``(x, y)`` pixel points (missing rows left out)."""
        return [[(x, y) for x, y in zip(lane, self.h_samples) if x >= 0] for lane in self.lanes]

    def to_tusimple(self, raw_file: str | None = None) -> dict:
        """A TuSimple submission line (``run_time`` in ms, as the official tool reads it)."""
        return {"raw_file": raw_file or self.source, "lanes": self.lanes, "h_samples": self.h_samples,
                "run_time": round(self.run_time_ms, 2)}


def default_h_samples(height: int) -> list[int]:
    """TuSimple's rows (160..710 every 10 px on 720-high frames), scaled to ``height``."""
    return [int(round(y * height / 720)) for y in range(160, 720, 10)]


def resolve_weights(weights: str | os.PathLike[str]) -> Path:
    """A checkpoint file, or a run directory (its ``best.pt``, else ``last.pt``)."""
    path = Path(weights).expanduser()
    if path.is_dir():
        for name in ("best.pt", "last.pt"):
            if (path / "checkpoints" / name).is_file():
                return path / "checkpoints" / name
        raise PredictError(f"weights={str(weights)!r}: a directory without checkpoints/best.pt or last.pt "
                           f"(give a run directory of lanenb train, or a .pt file)")
    if not path.is_file():
        raise PredictError(f"weights={str(weights)!r}: no such file or run directory")
    return path


class Predictor:
    """A checkpoint ready to predict.

    Args:
        weights: a run directory or a ``.pt`` checkpoint written by the trainer.
        device: ``auto`` (CUDA when available), ``cpu`` or ``cuda[:N]``.
        amp: mixed precision on CUDA (default: on with CUDA).
        backbone: if given, refuse a checkpoint of another backbone (names both).

    Raises:
        PredictError: missing or unreadable weights, wrong backbone, unknown device.
    """

    def __init__(self, weights: str | os.PathLike[str], *, device: str = "auto", amp: bool | None = None,
                 backbone: str | None = None) -> None:
        self.path = resolve_weights(weights)
        try:
            self.model, self.args = build_from_checkpoint(self.path)
        except (ValueError, FileNotFoundError) as exc:
            raise PredictError(str(exc)) from None
        if backbone is not None and backbone != self.args["backbone"]:
            raise PredictError(f"checkpoint {self.path} was trained with backbone {self.args['backbone']!r}, "
                               f"not {backbone!r}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.device = torch.device(device)
        except RuntimeError:
            raise PredictError(f"device={device!r}: use auto, cpu or cuda[:N]") from None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise PredictError(f"device={device!r}: no CUDA device here")
        self.model.to(self.device)
        self.amp = (self.device.type == "cuda") if amp is None else bool(amp and self.device.type == "cuda")
        self.input_size: tuple[int, int] = tuple(self.args["input_size"])

    def logits(self, frames_bgr: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw ``(seg_logits, exist_logits)`` for BGR frames (what export is checked against)."""
        batch = torch.stack([prepare_frame(f, self.input_size) for f in frames_bgr]).to(self.device)
        with torch.no_grad(), torch.autocast(device_type=self.device.type, enabled=self.amp):
            seg, ex = self.model(normalize_images(batch))
        return seg.float(), ex.float()

    def __call__(self, frames_bgr: Sequence[np.ndarray], sources: Sequence[str] | None = None,
                 h_samples: Sequence[Sequence[int]] | None = None) -> list[Prediction]:
        """Lanes for a batch of BGR uint8 frames (any sizes; each is resized to the model's)."""
        frames = list(frames_bgr)
        if not frames:
            return []
        for i, f in enumerate(frames):
            if not isinstance(f, np.ndarray) or f.ndim != 3 or f.shape[2] != 3 or f.dtype != np.uint8:
                raise PredictError(f"frame {i}: expected a uint8 HxWx3 BGR image, got "
                                   f"{getattr(f, 'dtype', type(f).__name__)} {getattr(f, 'shape', '')}")
        names = list(sources) if sources is not None else [f"frame-{i}" for i in range(len(frames))]
        t0 = time.perf_counter()
        seg, ex = self.logits(frames)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        prob = torch.softmax(seg, dim=1).cpu()
        exist = torch.sigmoid(ex).cpu()
        net_ms = (time.perf_counter() - t0) * 1000.0 / len(frames)
        out = []
        for i, frame in enumerate(frames):
            t1 = time.perf_counter()
            size = (int(frame.shape[0]), int(frame.shape[1]))
            rows = list(h_samples[i]) if h_samples is not None else default_h_samples(size[0])
            lanes = probmaps_to_lanes(prob[i], exist[i], rows, size)
            out.append(Prediction(names[i], lanes, [int(r) for r in rows], [float(v) for v in exist[i]], size,
                                  net_ms + (time.perf_counter() - t1) * 1000.0))
        return out
