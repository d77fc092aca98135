"""Inference speed: eager PyTorch vs TorchScript vs ONNX Runtime, batch 1 and 8.

    python bench/inference_speed.py                          # small and vgg16 at 288x800, CPU
    python bench/inference_speed.py --backbones small --repeats 20 --device cuda

Prints per backbone, runtime and batch size: latency per frame p50/p95 (a batch's time divided
by its frames) and throughput in frames/s, with the CPU (or GPU) beside them. Models have
random weights (speed does not depend on them) and are saved as trainer checkpoints first, so
the exports go through ``lanenb export`` exactly as a user's would. Network only: decoding and
post-processing are not included (``lanenb predict`` prints the whole per-frame run time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from benchutil import cpu_name


def checkpoint(backbone: str, size: tuple[int, int], folder: Path) -> Path:
    from lanenb_trainer.models import build_model

    model = build_model(backbone, input_size=size)
    path = folder / f"{backbone}.pt"
    torch.save({"format": 1, "model": model.state_dict(),
                "model_args": {"backbone": backbone, "num_lanes": 4, "input_size": list(size)}}, path)
    return path


def torch_runner(module, device: torch.device):
    """A forward pass of ``module`` on ``device``, finished (synchronised) when it returns."""
    def run(x: torch.Tensor) -> None:
        with torch.no_grad():
            module(x.to(device))
        if device.type == "cuda":
            torch.cuda.synchronize()
    return run


def timed(fn, x, repeats: int) -> list[float]:
    fn(x)  # warm-up
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(x)
        out.append((time.perf_counter() - t) / x.shape[0])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbones", default="small,vgg16")
    ap.add_argument("--size", default="288x800")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    h, w = (int(v) for v in args.size.split("x"))
    from lanenb.inference.export import export
    from lanenb_trainer.models import build_from_checkpoint

    device = torch.device(args.device)
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"{cpu_name()} ({torch.get_num_threads()} threads)")
    print(f"device: {where}; torch {torch.__version__}; input {h}x{w}; network only")
    tmp = Path(tempfile.mkdtemp(prefix="lanenb-bench-infer-"))
    for backbone in args.backbones.split(","):
        ckpt = checkpoint(backbone, (h, w), tmp)
        model, _ = build_from_checkpoint(ckpt)
        model.to(device)
        t = time.perf_counter()
        ts = export(ckpt, "torchscript", tmp / f"{backbone}.ts.pt", check=False)
        ts_s = time.perf_counter() - t
        runtimes = {"eager": torch_runner(model, device),
                    "torchscript": torch_runner(torch.jit.load(str(ts.path), map_location=device), device)}
        onnx_s = None
        if device.type == "cpu":
            import onnxruntime as ort

            t = time.perf_counter()
            onnx = export(ckpt, "onnx", tmp / f"{backbone}.onnx", check=False)
            onnx_s = time.perf_counter() - t
            session = ort.InferenceSession(str(onnx.path), providers=["CPUExecutionProvider"])
            runtimes["onnxruntime"] = lambda x, s=session: s.run(None, {"images": x.numpy()})
        print(f"\n{backbone}: export TorchScript {ts_s:.1f} s" + (f", ONNX {onnx_s:.1f} s" if onnx_s else ""))
        for batch in (int(b) for b in args.batches.split(",")):
            x = torch.randn(batch, 3, h, w)
            for name, fn in runtimes.items():
                per_frame = timed(fn, x, args.repeats)
                p50 = statistics.median(per_frame) * 1000
                p95 = float(np.percentile(per_frame, 95)) * 1000
                print(f"  batch {batch}  {name:12s} p50 {p50:8.1f} ms/frame  p95 {p95:8.1f} ms/frame  "
                      f"{1000.0 / p50:6.2f} frames/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
