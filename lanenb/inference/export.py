"""Export a trained SCNN for deployment: ONNX (opset >= 17, 18 by default; dynamic batch) or TorchScript.

The message passing runs its plain per-slice form for export (``MessagePassing.plain``): the
custom autograd ``Function`` of training cannot be recorded by tracers. ``export`` checks the
exported model against eager PyTorch on a real-sized input and reports the largest difference
of the logits (ONNX Runtime for ONNX, the loaded TorchScript module for TorchScript).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from lanenb_trainer.atomic import atomic_open
from lanenb_trainer.inference import PredictError, resolve_weights
from lanenb_trainer.models import SCNN, build_from_checkpoint

__all__ = ["export", "ExportResult", "FORMATS", "OPSET"]

FORMATS = ("onnx", "torchscript")
OPSET = 18


@dataclass
class ExportResult:
    path: Path
    format: str
    input_size: tuple[int, int]
    max_abs_diff: float | None  # exported vs eager logits on a random batch of 2


def _size(value: int | None, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 32 or value % 8:
        raise PredictError(f"{name}={value!r}: must be a multiple of 8 and >= 32")
    return value


def export(weights: str | os.PathLike[str], fmt: str = "onnx", out: str | os.PathLike[str] | None = None, *,
           img_height: int | None = None, img_width: int | None = None, opset: int = OPSET,
           check: bool = True) -> ExportResult:
    """Export ``weights`` (a run directory or checkpoint) as ``fmt``.

    Args:
        fmt: ``onnx`` or ``torchscript``.
        out: output file (default beside the checkpoint: ``model.onnx`` / ``model.torchscript.pt``).
        img_height, img_width: input size (default: the size the model was trained at).
        opset: ONNX opset (>= 17).
        check: run the exported model once and compare its logits with eager PyTorch.

    Raises:
        PredictError: unknown format, bad size or opset, unreadable weights.
    """
    if fmt not in FORMATS:
        raise PredictError(f"format={fmt!r}: must be one of {', '.join(FORMATS)}")
    if isinstance(opset, bool) or not isinstance(opset, int) or opset < 17:
        raise PredictError(f"opset={opset!r}: must be an integer >= 17")
    path = resolve_weights(weights)
    try:
        model, args = build_from_checkpoint(path)
    except (ValueError, FileNotFoundError) as exc:
        raise PredictError(str(exc)) from None
    h = _size(img_height, args["input_size"][0], "img_height")
    w = _size(img_width, args["input_size"][1], "img_width")
    model.message_passing.plain = True
    model.eval()
    target = Path(out) if out else path.parent / ("model.onnx" if fmt == "onnx" else "model.torchscript.pt")
    target.parent.mkdir(parents=True, exist_ok=True)
    example = torch.randn(1, 3, h, w)
    if fmt == "torchscript":
        with torch.no_grad():
            traced = torch.jit.trace(model, example, check_trace=False)
        with atomic_open(target, "wb") as fh:
            torch.jit.save(traced, fh)
    else:
        tmp = target.with_name(f".{target.name}.part")
        try:
            # the torch.export-based exporter (torch's default since 2.9; needs onnxscript)
            batch = torch.export.Dim("batch", min=1, max=1024)
            torch.onnx.export(model, (example,), str(tmp), input_names=["images"],
                              output_names=["seg_logits", "exist_logits"], opset_version=opset,
                              dynamic_shapes=({0: batch},), dynamo=True, verbose=False)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    diff = _check(model, target, fmt, h, w) if check else None
    return ExportResult(target, fmt, (h, w), diff)


def _check(model: SCNN, target: Path, fmt: str, h: int, w: int) -> float:
    x = torch.randn(2, 3, h, w, generator=torch.Generator().manual_seed(0))
    model.message_passing.plain = False  # the reference is the model as trained
    with torch.no_grad():
        ref = model(x)
    if fmt == "torchscript":
        loaded = torch.jit.load(str(target))
        with torch.no_grad():
            got = loaded(x)
        got = [t.numpy() for t in got]
    else:
        import onnxruntime as ort

        session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
        got = session.run(None, {"images": x.numpy()})
    return max(float(abs(r.numpy() - g).max()) for r, g in zip(ref, got))
