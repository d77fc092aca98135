"""Use a trained model: lanes on your own images, a video or a dataset split.

    import lanenb
    preds = lanenb.predict("runs/first", "my_frames/*.jpg")   # list[Prediction], lanes in image pixels

``lanenb predict`` writes a TuSimple submission file (with each frame's real ``run_time``),
the frames (or an MP4) with the lanes drawn, and with ``--data`` the official metrics. The
model, its input size and the pre/post-processing are the trainer's (``lanenb_trainer.inference``).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from lanenb_trainer.inference import PredictError, Prediction, Predictor

if TYPE_CHECKING:  # tqdm is imported when a bar is shown
    from tqdm.auto import tqdm

__all__ = ["predict", "Prediction", "PredictError", "Predictor", "list_images", "predict_images",
           "predict_video", "predict_split"]

IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".bmp"}


def list_images(images: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Image files from a directory (recursive), a glob pattern, one file or a list of them.

    Raises:
        PredictError: nothing matches, or a listed file does not exist.
    """
    if not isinstance(images, (str, os.PathLike)):  # a list (any sequence) of files
        paths = [Path(p).expanduser() for p in images]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise PredictError(f"image file(s) not found: {', '.join(missing[:3])}")
        return paths
    text = os.fspath(images)
    path = Path(text).expanduser()
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.suffix.lower() in IMAGE_EXTS and p.is_file())
    elif path.is_file():
        found = [path]
    else:
        found = sorted(Path(p) for p in glob.glob(os.path.expanduser(text), recursive=True)
                       if Path(p).suffix.lower() in IMAGE_EXTS)
    if not found:
        raise PredictError(f"images={text!r}: no image files (jpg, png, bmp) found there")
    return found


def _read(path: Path) -> np.ndarray:
    import cv2

    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        raise PredictError(f"cannot read image {str(path)!r} (not an image, or corrupt)")
    return img


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _check_batch(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise PredictError(f"batch_size={batch_size!r}: must be an integer >= 1")


def predict(weights: str | os.PathLike[str] | Predictor, images: Any, *, batch_size: int = 8,
            device: str = "auto") -> list[Prediction]:
    """Predict lanes on images.

    Args:
        weights: a run directory, a checkpoint file, or a ready ``Predictor``.
        images: a directory, a glob, a file, a list of paths, or a list of BGR ``numpy`` frames.
        batch_size: frames per forward pass.
        device: ``auto``, ``cpu`` or ``cuda[:N]``.

    Returns:
        One ``Prediction`` per image (``lanes`` in the image's pixels, ``exist`` per lane slot).

    Raises:
        PredictError: bad weights, an unreadable image, nothing to predict.
    """
    _check_batch(batch_size)
    model = weights if isinstance(weights, Predictor) else Predictor(weights, device=device)
    if isinstance(images, np.ndarray):
        images = [images]
    if isinstance(images, (list, tuple)) and images and all(isinstance(i, np.ndarray) for i in images):
        out: list[Prediction] = []
        for chunk in _batches(list(images), batch_size):
            out += model(chunk)
        return out
    paths = list_images(images)
    return [p for chunk in _batches(paths, batch_size)
            for p in model([_read(x) for x in chunk], sources=[str(x) for x in chunk])]


def _progress(total: int, desc: str, unit: str = "frame") -> tqdm[NoReturn]:
    """A progress bar that suits where it is shown (notebook widget, terminal, or plain lines in a log)."""
    from lanenb_trainer.progress import progress_bar

    bar: tqdm[NoReturn] = progress_bar(total=total, desc=desc, unit=unit)
    return bar


def _draw(frame: np.ndarray, pred: Prediction) -> np.ndarray:
    """BGR frame with the predicted lanes drawn (slot colours)."""
    import cv2

    from lanenb_trainer.data.preview import draw_lanes

    rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
    return cv2.cvtColor(draw_lanes(rgb, pred.lanes, pred.h_samples), cv2.COLOR_RGB2BGR)


def _png(bgr: np.ndarray) -> bytes:
    """PNG bytes of a BGR frame; a frame OpenCV cannot encode is an error, not an empty file."""
    import cv2

    ok, buf = cv2.imencode(".png", bgr)
    if not ok:
        raise ValueError(f"PNG encoding failed for a {bgr.shape} {bgr.dtype} frame")
    return buf.tobytes()


def predict_images(model: Predictor, paths: Sequence[Path], out: Path, *, batch_size: int = 8,
                   draw: bool = True, root: Path | None = None) -> list[dict]:
    """Predict ``paths``; write ``out/images/<name>.png`` with lanes drawn; return submission lines."""
    from lanenb_trainer.atomic import write_bytes

    lines = []
    bar = _progress(len(paths), "predict")
    try:
        for chunk in _batches(list(paths), batch_size):
            frames = [_read(p) for p in chunk]
            rel = [str(p.relative_to(root)) if root and p.is_relative_to(root) else p.name for p in chunk]
            for frame, pred, name in zip(frames, model(frames, sources=rel), rel):
                lines.append(pred.to_tusimple(name))
                if draw:
                    write_bytes(out / "images" / (Path(name).with_suffix("").as_posix().replace("/", "_") + ".png"),
                                _png(_draw(frame, pred)))
            bar.update(len(chunk))
    finally:
        bar.close()
    return lines


def predict_video(model: Predictor, video: Path, out: Path, *, batch_size: int = 8) -> tuple[list[dict], Path]:
    """Predict every frame of ``video``; write ``out/<stem>-lanes.mp4`` (OpenCV's writer)."""
    import cv2

    cap = cv2.VideoCapture(str(video))
    if not cap.isOpened():
        raise PredictError(f"cannot open video {str(video)!r} (missing, or a format OpenCV cannot read)")
    fps = cap.get(cv2.CAP_PROP_FPS) or 20.0
    total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
    out.mkdir(parents=True, exist_ok=True)
    final = out / f"{video.stem}-lanes.mp4"
    tmp = out / f".{video.stem}-lanes.part.mp4"  # renamed at the end: no half video looks complete
    writer = None
    lines: list[dict] = []
    bar = _progress(total, "predict video")
    index = 0
    try:
        while True:
            frames: list[np.ndarray] = []
            while len(frames) < batch_size:
                ok, frame = cap.read()
                if not ok:
                    break
                frames.append(frame)
            if not frames:
                break
            names = [f"{video.stem}/{index + i:06d}" for i in range(len(frames))]
            for frame, pred in zip(frames, model(frames, sources=names)):
                if writer is None:
                    h, w = frame.shape[:2]
                    writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter.fourcc(*"mp4v"), fps, (w, h))
                writer.write(_draw(frame, pred))
                lines.append(pred.to_tusimple())
            index += len(frames)
            bar.update(len(frames))
    finally:
        bar.close()
        cap.release()
        if writer is not None:
            writer.release()
    if index == 0:
        tmp.unlink(missing_ok=True)
        raise PredictError(f"video {str(video)!r} has no readable frame")
    os.replace(tmp, final)
    return lines, final


def predict_split(model: Predictor, root: Path, split: str, out: Path, *, batch_size: int = 8,
                  draw: int = 20) -> tuple[list[dict], dict]:
    """Predict a TuSimple split at its labels' rows; score it as the trainer scores its test
    (``test_scores``: the lanes as the headline, the official 200 ms rule beside it), so the
    same checkpoint on the same frames gives the same figure here and in the run's headline."""
    from lanenb_trainer.atomic import write_bytes
    from lanenb_trainer.data.labels import load_image
    from lanenb_trainer.data.splits import load_split
    from lanenb_trainer.evaluation.lane_eval import test_scores

    try:
        records = load_split(root, split)
    except (ValueError, OSError) as exc:
        raise PredictError(f"--data {str(root)!r} --split {split}: {exc}") from None
    lines: list[dict] = []
    bar = _progress(len(records), f"predict {split}")
    try:
        for chunk in _batches(records, batch_size):
            frames = [load_image(root / r.raw_file) for r in chunk]
            preds = model(frames, sources=[r.raw_file for r in chunk], h_samples=[r.h_samples for r in chunk])
            for frame, pred in zip(frames, preds):
                lines.append(pred.to_tusimple())
                if len(lines) <= draw:
                    write_bytes(out / "images" / (pred.source.replace("/", "_").rsplit(".", 1)[0] + ".png"),
                                _png(_draw(frame, pred)))
            bar.update(len(chunk))
    finally:
        bar.close()
    return lines, test_scores(lines, records)


def write_predictions(lines: Iterable[dict], path: Path) -> Path:
    from lanenb_trainer.evaluation.jsonl import write_json_lines

    return write_json_lines(path, lines)
