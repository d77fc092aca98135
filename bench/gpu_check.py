"""GPU check: the CUDA paths that CPU machines never run, and the speed figures issue 24 asks
for, in one script that prints figures and fits one device call.

A GPU session has ~15 minutes of device time in all (machine start included), one command at
most 10: this script runs its sections in order of value within ``--budget`` seconds, skips
(and says so) what no longer fits, and writes its JSON report after every section, so a run
cut short still brings back what it measured. In a GPU session run it through the carry kit
(``bash scripts/gpu/session.sh``, docs/GPU.md), which installs what the bare machine lacks.

Sections (``--only``/``--skip`` take these names):

``message_passing``
    the custom autograd message passing on CUDA equals the per-slice loop (float64: output
    and every gradient within 1e-9 relative); fwd+bwd times in float32/float16/bfloat16 of
    ours, the loop, ours captured in a CUDA graph, the Triton sweep (when importable), and
    the FLOP floor: four full-map convolutions of the same size (goal: ours <= 2x the floor).
``vgg16_training``
    training images/s of ``scnn_vgg16`` at 288x800: fp32, fp16 and bf16 AMP, NCHW and
    channels-last.
``inference``
    ``scnn_vgg16`` batch 1 at 288x800 in fp16: frames/s eager, channels-last and replayed
    as a CUDA graph (goal >= 50 frames/s).
``train_resume``
    a 1-GPU ``ddp`` run with AMP (real launcher: ``mpirun`` when present, else one process
    per rank with torchrun's variables) stopped by ``--max-steps`` and ``--resume``d, next to
    an uninterrupted run: both exit cleanly, the resumed run starts where the first stopped,
    with ``--deterministic`` the same losses as the uninterrupted run and the same final weights
    (or within 1e-3 where torch names the kernels it could not make deterministic),
    NVML fields in the ``system`` events, CUDA-event ``timing`` events.
``shared_gpu``
    two ranks on one GPU (``--device cuda``: the ``ddp`` engine falls back to gloo, which
    NCCL refuses): both finish on ``cuda:0`` with the same weights.
``long_run``
    ``scnn_vgg16`` 288x800 on synthetic 1280x720 frames with loader workers: steady-state
    images/s, GPU utilisation from NVML (goal > 96%), the share of step time spent waiting
    for data (goal < 2%), and the projected full TuSimple run (3,268 frames x 50 epochs,
    PytorchAutoDrive's VGG16-SCNN recipe) beside the RUN:AI guide's 12 h 45 min on 1 V100.
``quickstart``
    ``notebooks/01-quickstart.ipynb`` executed by papermill with ``gpus=1`` (when papermill
    and a python3 kernel are there).

Exit status 0 when every section that ran passed, 1 when one failed, 2 when there is no CUDA
device (``--smoke`` runs the same plumbing on the CPU with tiny sizes, for the test suite).

    python bench/gpu_check.py                          # everything, 480 s budget
    python bench/gpu_check.py --only message_passing inference
    python bench/gpu_check.py --smoke                  # CPU: does the script itself work?
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import cpu_name

REPO = Path(__file__).resolve().parent.parent
SECTIONS = ("message_passing", "vgg16_training", "inference", "train_resume", "shared_gpu", "long_run",
            "quickstart")
TUSIMPLE_TRAIN_FRAMES = 3268  # the RUN:AI guide's training frames
RECIPE_EPOCHS = 50  # PytorchAutoDrive's VGG16-SCNN TuSimple recipe (tools/shells/vgg16_scnn_tusimple.sh)
GUIDE_1GPU_H = 12.75  # RUN:AI guide: 1 GPU (V100) 12 h 45 min


# ------------------------------------------------------------------------------- launching
def _events(lines: list, kind: str, rank: int | None = None) -> list:
    return [ln.event for ln in lines
            if ln.event is not None and ln.event.kind == kind and (rank is None or ln.event.rank == rank)]


def launch(processes: int, argv: list[str], *, timeout: float, extra_env: dict[str, str] | None = None
           ) -> tuple[int, list]:
    """Run ``python -m lanenb_trainer argv`` on ``processes`` ranks; (exit status, LogLines).

    ``mpirun`` when it is on PATH (what users run); else one process per rank with torchrun's
    variables (RANK, WORLD_SIZE, LOCAL_RANK, ...), which the ``ddp`` engine reads too: a bare
    GPU machine without Open MPI still exercises the CUDA path.
    """
    from lanenb.launch.lines import LogLine, iter_output
    from lanenb.launch.mpirun import free_port, launch_env, start_local, stop

    lines: list = []
    env = launch_env(extra={"PYTHONUNBUFFERED": "1", **(extra_env or {})})
    if shutil.which("mpirun"):
        mpirun = start_local(processes, argv, env=env)
        assert mpirun.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(iter_output(mpirun.stdout)), daemon=True)
        reader.start()
        try:
            code = mpirun.wait(timeout)
        except subprocess.TimeoutExpired:
            stop(mpirun, grace=5)
            raise TimeoutError(f"{processes}-rank run still going after {timeout:.0f} s") from None
        reader.join(10)
        return code, lines
    env["MASTER_PORT"] = str(free_port())
    procs = []
    for rank in range(processes):
        rank_env = {**env, "RANK": str(rank), "WORLD_SIZE": str(processes), "LOCAL_RANK": str(rank),
                    "LOCAL_WORLD_SIZE": str(processes)}
        procs.append(subprocess.Popen([sys.executable, "-m", "lanenb_trainer", *argv], env=rank_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      stdin=subprocess.DEVNULL))

    def read(rank: int, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for text in proc.stdout:
            lines.append(LogLine(rank, text.rstrip("\n")))

    readers = [threading.Thread(target=read, args=(r, p), daemon=True) for r, p in enumerate(procs)]
    for t in readers:
        t.start()
    deadline = time.monotonic() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise TimeoutError(f"{processes}-rank run still going after {timeout:.0f} s") from None
    for t in readers:
        t.join(5)
    return max(codes, key=abs), lines


def log_tail(lines: list, n: int = 25) -> list[str]:
    return [ln.tagged() for ln in lines[-n:]]


def synth(root: Path, frames: int, width: int, height: int, workers: int = 8, test: int = 8) -> Path:
    """``frames`` synthetic TuSimple frames under ``root``, drawn by ``workers`` processes
    (one synthetic 1280x720 frame costs ~0.15 s of a core): chunks merged into one root."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from lanenb_trainer.data.synth import synthesize

    workers = max(1, min(workers, frames // 8 or 1))
    sizes = [frames // workers + (1 if i < frames % workers else 0) for i in range(workers)]
    parts = [root.parent / f"{root.name}-part{i}" for i in range(workers)]
    # spawned, not forked: this process may hold a CUDA context by now
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        jobs = [pool.submit(synthesize, p, n, seed=100 + i, width=width, height=height, test_fraction=0.0,
                            progress=False) for i, (p, n) in enumerate(zip(parts, sizes))]
        for job in jobs:
            job.result()
    records: list[str] = []
    for i, part in enumerate(parts):
        for line in (part / "label_data_synth.json").read_text().splitlines():
            rec = json.loads(line)
            rec["raw_file"] = rec["raw_file"].replace("clips/synth/", f"clips/synth{i}/", 1)
            records.append(json.dumps(rec))
        (root / "clips").mkdir(parents=True, exist_ok=True)
        (part / "clips" / "synth").rename(root / "clips" / f"synth{i}")
        shutil.rmtree(part)
    (root / "label_data_synth.json").write_text("\n".join(records[test:]) + "\n")
    (root / "test_label.json").write_text("\n".join(records[:test]) + "\n")
    return root


# ------------------------------------------------------------------------------- sections
def timed_cuda(fn: Callable[[], Any], repeats: int, device: torch.device) -> float:
    """Median seconds of ``fn`` over ``repeats`` runs after one warm-up (CUDA events on a GPU)."""
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def check_message_passing(dev: torch.device, shape: tuple[int, int, int, int], repeats: int) -> dict:
    """Equality (float64) and fwd+bwd speed of the message-passing variants and the floor."""
    from lanenb_trainer.models.message_passing import MessagePassing, plain_message_passing

    n, c, h, w = shape
    out: dict[str, Any] = {"shape": list(shape)}

    def fwd_bwd(impl, mp, x, g) -> list[torch.Tensor]:
        x.grad = None
        mp.zero_grad(set_to_none=True)
        y = impl(x)
        y.backward(g)
        return [y.detach(), x.grad] + [m.weight.grad for m in (mp.down, mp.up, mp.right, mp.left)]

    def plain(mp):
        return lambda t: plain_message_passing(t, mp.down.weight, mp.up.weight, mp.right.weight, mp.left.weight)

    torch.manual_seed(0)
    mp = MessagePassing(c, 9).to(dev, torch.float64)
    with torch.no_grad():
        for conv in (mp.down, mp.up, mp.right, mp.left):
            conv.weight.normal_(0.0, 1.0 / (c * 9) ** 0.5)
    x = torch.randn(n, c, h, w, device=dev, dtype=torch.float64, requires_grad=True)
    g = torch.randn(n, c, h, w, device=dev, dtype=torch.float64)
    walls: dict[str, float] = {}  # wall seconds per step, compiles and captures included
    t_wall = time.perf_counter()
    ours = [t.clone() for t in fwd_bwd(mp, mp, x, g)]
    ref = fwd_bwd(plain(mp), mp, x, g)
    out["max_rel_err_f64"] = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))
                                 for a, b in zip(ours, ref))
    out["ok_equal"] = out["max_rel_err_f64"] <= 1e-9
    walls["float64 equality"] = round(time.perf_counter() - t_wall, 1)

    triton_ok = False
    try:
        from lanenb_trainer.models.sweep_triton import triton_available

        triton_ok = dev.type == "cuda" and triton_available()
    except ImportError:
        pass
    times: dict[str, dict[str, float | str]] = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        if dev.type == "cpu" and dtype is torch.float16:
            continue
        key = str(dtype).replace("torch.", "")
        m = MessagePassing(c, 9).to(dev, dtype)
        xd = torch.randn(n, c, h, w, device=dev, dtype=dtype, requires_grad=True)
        gd = torch.randn(n, c, h, w, device=dev, dtype=dtype)
        row: dict[str, float | str] = {}
        for name, fn in _mp_variants(fwd_bwd, plain, m, xd, gd, triton_ok).items():
            t_wall = time.perf_counter()
            try:
                row[name] = timed_cuda(fn, repeats, dev)
            except Exception as exc:  # a variant that fails is a finding, not the end of the check
                row[name] = f"failed: {type(exc).__name__}: {exc}"[:300]
            walls[f"{key} {name}"] = round(time.perf_counter() - t_wall, 1)
        t_wall = time.perf_counter()
        if dev.type == "cuda":
            row["graphed"] = _graphed_time(m, xd, gd, repeats)
            walls[f"{key} graphed"] = round(time.perf_counter() - t_wall, 1)
        t_wall = time.perf_counter()
        row["floor"] = _floor_time(m, xd, gd, repeats, dev)
        walls[f"{key} floor"] = round(time.perf_counter() - t_wall, 1)
        if isinstance(row.get("ours"), float) and isinstance(row.get("floor"), float):
            row["ours_over_floor"] = row["ours"] / row["floor"]
        times[key] = row
    out["times_s"] = times
    out["wall_s"] = walls
    f32 = times.get("float32", {})
    out["loop_over_ours_f32"] = (f32["loop"] / f32["ours"]
                                 if isinstance(f32.get("loop"), float) and isinstance(f32.get("ours"), float)
                                 else None)
    out["ok_speed"] = out["loop_over_ours_f32"] is not None and out["loop_over_ours_f32"] >= 1.0
    # speed is judged on a GPU only: --smoke's tiny CPU shapes say nothing about it
    out["ok"] = out["ok_equal"] and (out["ok_speed"] or dev.type != "cuda")
    return out


def _mp_variants(fwd_bwd, plain, m, x, g, triton_ok: bool) -> dict[str, Callable[[], Any]]:
    """The timed message-passing variants on one module and input (closures bound here)."""
    variants: dict[str, Callable[[], Any]] = {
        "ours": lambda: fwd_bwd(m, m, x, g),
        "loop": lambda: fwd_bwd(plain(m), m, x, g),
    }
    if triton_ok:
        from lanenb_trainer.models.message_passing import spatial_message_passing

        def tri(t):
            return spatial_message_passing(t, m.down.weight, m.up.weight, m.right.weight, m.left.weight,
                                           algorithm="triton")
        variants["triton"] = lambda: fwd_bwd(tri, m, x, g)
    return variants


def _graphed_time(m, x, g, repeats: int) -> float | str:
    """fwd+bwd of ``m`` captured once with ``torch.cuda.make_graphed_callables`` and replayed:
    what the sequential slices cost without their launch gaps."""
    try:
        graphed = torch.cuda.make_graphed_callables(m, (x,))

        def run():
            x.grad = None
            graphed(x).backward(g)

        return timed_cuda(run, repeats, x.device)
    except Exception as exc:
        return f"failed: {type(exc).__name__}: {exc}"[:300]


def _floor_time(m, x, g, repeats: int, dev: torch.device) -> float | str:
    """The FLOP floor: the same four convolutions over whole maps at once (no sequence)."""
    import torch.nn.functional as F

    def run():
        x.grad = None
        m.zero_grad(set_to_none=True)
        y = x
        for conv, pad in ((m.down, (0, 4)), (m.up, (0, 4)), (m.right, (4, 0)), (m.left, (4, 0))):
            y = y + F.relu(F.conv2d(y, conv.weight, padding=pad))
        y.backward(g)

    try:
        return timed_cuda(run, repeats, dev)
    except Exception as exc:
        return f"failed: {type(exc).__name__}: {exc}"[:300]


def check_training_throughput(dev: torch.device, backbone: str, size: tuple[int, int], batch: int,
                              iters: int) -> dict:
    """Training images/s per precision and memory format (synthetic tensors: the model alone)."""
    out: dict[str, Any] = {"backbone": backbone, "size": list(size), "batch": batch}
    rates: dict[str, float | str] = {}
    dtypes = [None, torch.float16, torch.bfloat16] if dev.type == "cuda" else [None, torch.bfloat16]
    for dtype in dtypes:
        for channels_last in (False, True):
            key = f"{'fp32' if dtype is None else str(dtype)[6:]}{'+cl' if channels_last else ''}"
            try:
                rates[key] = _train_rate(dev, backbone, size, batch, iters, dtype, channels_last)
            except Exception as exc:
                rates[key] = f"failed: {type(exc).__name__}: {exc}"[:300]
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    out["images_per_s"] = rates
    out["ok"] = all(isinstance(v, float) and v > 0 for v in rates.values())
    return out


def _train_rate(dev, backbone, size, batch, iters, dtype, channels_last) -> float:
    from lanenb_trainer.models import build_model
    from lanenb_trainer.recipe import scnn_loss
    from lanenb_trainer.training.precision import configure_algorithms

    configure_algorithms(False)  # as the trainer runs: cuDNN autotuning on

    torch.manual_seed(0)
    model = build_model(backbone, input_size=size).to(dev).train()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model.to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(dev.type) if dtype is torch.float16 else None
    x = torch.randn(batch, 3, *size, device=dev).contiguous(memory_format=fmt)
    mask = torch.randint(0, 5, (batch, *size), device=dev)
    exist = torch.randint(0, 2, (batch, 4), device=dev).float()
    losses: list[torch.Tensor] = []

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            seg, ex = model(x)
        loss, _, _ = scnn_loss(seg, ex, mask, exist)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        losses.append(loss.detach())

    for _ in range(3):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if not all(math.isfinite(float(v)) for v in losses):
        raise FloatingPointError("a loss was not finite")
    return batch * iters / dt


def check_inference(dev: torch.device, backbone: str, size: tuple[int, int], iters: int) -> dict:
    """Batch-1 frames/s in fp16 (bf16 on a CPU): eager, channels-last, CUDA graph replay."""
    from lanenb_trainer.models import build_model

    dtype = torch.float16 if dev.type == "cuda" else torch.bfloat16
    model = build_model(backbone, input_size=size).to(dev).eval()
    x = torch.randn(1, 3, *size, device=dev)
    out: dict[str, Any] = {"backbone": backbone, "size": list(size), "dtype": str(dtype)[6:]}
    fps: dict[str, float | str] = {}

    def forward():
        with torch.no_grad(), torch.autocast(dev.type, dtype=dtype):
            return model(x)

    for name in ("eager", "channels_last", "cuda_graph"):
        try:
            if name == "channels_last":
                model.to(memory_format=torch.channels_last)
                x = x.contiguous(memory_format=torch.channels_last)
            if name == "cuda_graph":
                if dev.type != "cuda":
                    continue
                static = x.clone()
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(3):
                        with torch.no_grad(), torch.autocast("cuda", dtype=dtype):
                            model(static)
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph), torch.no_grad(), torch.autocast("cuda", dtype=dtype, cache_enabled=False):
                    model(static)
                fps[name] = 1.0 / timed_cuda(graph.replay, iters, dev)
            else:
                fps[name] = 1.0 / timed_cuda(forward, iters, dev)
        except Exception as exc:
            fps[name] = f"failed: {type(exc).__name__}: {exc}"[:300]
    out["frames_per_s"] = fps
    best = max((v for v in fps.values() if isinstance(v, float)), default=0.0)
    out["best_frames_per_s"] = best
    out["ok"] = best > 0
    out["goal_50fps_met"] = best >= 50 if dev.type == "cuda" else None
    return out


def _train_argv(data: Path, run_dir: Path, dev: torch.device, **kw: Any) -> list[str]:
    from lanenb_trainer.config import TrainConfig

    base: dict[str, Any] = dict(data=str(data), run_dir=str(run_dir), engine="ddp", backbone="small",
                img_height=144, img_width=400, batch_size=4, val_batch_size=8, epochs=2, log_every=1,
                system_interval=0.5, warmup_steps=2, timing_every=2, device=dev.type, use_val=False)
    base.update(kw)
    return TrainConfig(**base).validate().to_argv()


def check_train_resume(work: Path, dev: torch.device, steps: int, timeout: float, **kw: Any) -> dict:
    """A 1-GPU AMP run cut at ``steps`` and resumed, beside the same run uninterrupted, both
    ``--deterministic``: the same losses step for step and the same final weights."""
    data = synth(work / "synth", 48, 640, 360, workers=4)
    out: dict[str, Any] = {}
    kw = {"deterministic": True, **kw}  # bit-identical weights are the claim, on a GPU too
    code0, whole = launch(1, _train_argv(data, work / "whole", dev, **kw), timeout=timeout)
    code1, first = launch(1, _train_argv(data, work / "cut", dev, max_steps=steps, **kw), timeout=timeout)
    code2, second = launch(1, _train_argv(data, work / "cut", dev, resume=True, **kw), timeout=timeout)
    start1, start2 = _events(first, "start", 0), _events(second, "start", 0)
    end0, end1, end2 = (_events(x, "end", 0) for x in (whole, first, second))
    out["device"] = start1[0]["device"] if start1 else None
    out["precision"] = start1[0].get("precision") if start1 else None
    out["exits"] = [code0, code1, code2]
    out["statuses"] = [e[-1]["status"] if e else None for e in (end0, end1, end2)]
    out["resumed_from"] = (start2[0]["resumed_from"] or {}).get("step") if start2 else None
    ref = {e["step"]: e["loss"] for e in _events(whole, "step", 0)}
    got = {e["step"]: e["loss"] for e in _events(first, "step", 0) + _events(second, "step", 0)}
    out["losses_finite"] = bool(got) and all(v is not None and math.isfinite(v) for v in got.values())
    common = sorted(set(ref) & set(got))
    out["steps_compared"] = len(common)
    out["max_rel_loss_diff"] = max((abs(got[s] - ref[s]) / max(abs(ref[s]), 1e-12) for s in common), default=None)
    out["same_weights"] = bool(end0 and end2) and end0[-1]["param_checksum"] == end2[-1]["param_checksum"]
    # what --deterministic could not make deterministic (torch warns, naming the op): why weights differ
    out["nondeterministic_ops"] = sorted({ln.text.strip()[:200] for ln in whole + first + second
                                          if "does not have a deterministic implementation" in ln.text})
    want_dev = dev.type
    out["exact"] = out["max_rel_loss_diff"] == 0.0 and out["same_weights"]
    # exact, or off by rounding where torch named the kernels --deterministic could not pin down
    # (what to replace next); a larger difference is a resume bug
    near = (out["max_rel_loss_diff"] is not None and out["max_rel_loss_diff"] <= 1e-3
            and bool(out["nondeterministic_ops"]))
    out["ok_training"] = (out["exits"] == [0, 0, 0] and str(out["device"]).startswith(want_dev)
                          and out["statuses"] == ["completed", "stopped", "completed"]
                          and out["resumed_from"] == steps and out["losses_finite"]
                          and (out["exact"] or near))
    systems = _events(first, "system", 0) + _events(second, "system", 0)
    nvml = ("gpu_util", "gpu_mem_mb", "gpu_mem_total_mb")
    out["nvml_fields"] = {k: any(k in ev.data for ev in systems) for k in nvml}
    out["ok_nvml"] = (bool(systems) and all(out["nvml_fields"].values())) if dev.type == "cuda" else None
    timing = _events(first, "timing", 0) + _events(second, "timing", 0)
    phases = ("data_s", "h2d_s", "compute_s", "exchange_s", "optimizer_s")
    out["timing"] = [{k: ev.get(k) for k in ("step", "device", "step_s", *phases)} for ev in timing[-2:]]
    out["ok_timing"] = bool(timing) and all(
        str(ev["device"]).startswith(want_dev) and ev["compute_s"] > 0
        and sum(ev[k] for k in phases) <= 1.2 * ev["step_s"] for ev in timing)
    out["ok"] = out["ok_training"] and out["ok_nvml"] is not False and out["ok_timing"]
    if not out["ok"]:
        out["log_tail"] = log_tail(whole + first + second, 40)
    return out


def check_shared_gpu(work: Path, dev: torch.device, timeout: float, **kw: Any) -> dict:
    """Two ranks on one device: the run finishes, both ranks on it, identical weights."""
    data = synth(work / "synth2", 48, 640, 360, workers=4)
    code, lines = launch(2, _train_argv(data, work / "shared", dev, **{"max_steps": 8, "epochs": 1, **kw}),
                         timeout=timeout)
    starts, ends = _events(lines, "start"), _events(lines, "end")
    out: dict[str, Any] = {"exit": code, "devices": sorted(str(e["device"]) for e in starts),
                           "checksums_equal": len(ends) == 2 and len({e["param_checksum"] for e in ends}) == 1}
    out["ok"] = code == 0 and len(starts) == 2 and out["checksums_equal"] and all(
        d.startswith(dev.type) for d in out["devices"]) and len(set(out["devices"])) == 1
    if not out["ok"]:
        out["log_tail"] = log_tail(lines, 40)
    return out


def check_long_run(work: Path, dev: torch.device, *, backbone: str, size: tuple[int, int], frames: int,
                   frame_size: tuple[int, int], batch: int, steps: int, workers: int, amp_dtype: str,
                   timeout: float) -> dict:
    """A real run (loader workers, decode, augment, AMP) long enough for steady state."""
    t0 = time.perf_counter()
    data = synth(work / "long", frames, *frame_size, workers=os.cpu_count() or 1, test=8)
    out: dict[str, Any] = {"synth_s": round(time.perf_counter() - t0, 1), "backbone": backbone,
                           "size": list(size), "batch": batch, "steps": steps, "loader_workers": workers,
                           "amp_dtype": amp_dtype, "frames": frames, "frame_size": list(frame_size)}
    argv = _train_argv(data, work / "long-run", dev, backbone=backbone, img_height=size[0], img_width=size[1],
                       batch_size=batch, val_batch_size=batch, epochs=1000, max_steps=steps, log_every=5,
                       system_interval=0.5, timing_every=5, warmup_steps=10, use_workers=workers > 0,
                       num_workers=max(workers, 1), channels_last=True, amp_dtype=amp_dtype, lr=0.01,
                       tensorboard=False)
    code, lines = launch(1, argv, timeout=timeout)
    out["exit"] = code
    step_events = _events(lines, "step", 0)
    warm = [e for e in step_events if e["step"] > max(10, steps // 5)]
    out["images_per_s"] = (statistics.median(e["images_per_s"] for e in warm) if warm else None)
    timing = [e for e in _events(lines, "timing", 0) if e["step"] > max(10, steps // 5)]
    total = sum(e["step_s"] for e in timing)
    out["data_wait_share"] = sum(e["data_s"] for e in timing) / total if total else None
    # utilisation while it trains: the samples between the first warm step and the last step (by
    # time; counting samples instead took mostly model build, synthesis and test on an H200, where
    # 225 steps are 13 s of a 61 s run, and read a median of 0% beside 268 images/s)
    window = (min(e.t for e in warm), max(e.t for e in warm)) if warm else (0.0, -1.0)
    mid = [e["gpu_util"] for e in _events(lines, "system", 0)
           if "gpu_util" in e.data and window[0] <= e.t <= window[1]]
    out["gpu_util_samples"] = len(mid)
    out["gpu_util_median"] = statistics.median(mid) if mid else None
    out["gpu_util_mean"] = statistics.fmean(mid) if mid else None
    if out["images_per_s"]:
        hours = TUSIMPLE_TRAIN_FRAMES * RECIPE_EPOCHS / out["images_per_s"] / 3600
        out["projected_full_run_h"] = round(hours, 2)
        out["guide_1gpu_h"] = GUIDE_1GPU_H
    out["goal_util_met"] = out["gpu_util_mean"] is not None and out["gpu_util_mean"] > 96
    out["goal_data_wait_met"] = out["data_wait_share"] is not None and out["data_wait_share"] < 0.02
    out["ok"] = code == 0 and out["images_per_s"] is not None
    if not out["ok"]:
        out["log_tail"] = log_tail(lines, 40)
    return out


def check_quickstart(work: Path, timeout: float) -> dict:
    """notebooks/01-quickstart.ipynb with gpus=1, executed by papermill through ``lanenb notebook``."""
    try:
        import papermill  # noqa: F401
        from jupyter_client.kernelspec import KernelSpecManager

        if "python3" not in KernelSpecManager().find_kernel_specs():
            return {"ok": None, "skipped": "no python3 Jupyter kernel registered"}
    except ImportError as exc:
        return {"ok": None, "skipped": f"papermill/jupyter not importable: {exc}"}
    argv = [sys.executable, "-m", "lanenb", "notebook", "quickstart", "--out", str(work / "nb"),
            "-p", "gpus", "1", "-p", "processes", "1", "-p", "epochs", "2", "-p", "frames", "80"]
    t0 = time.perf_counter()
    home = work / "lanenb-home"
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=work,
                              env={**os.environ, "LANENB_HOME": str(home)})
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"still running after {timeout:.0f} s"}
    out: dict[str, Any] = {"exit": proc.returncode, "seconds": round(time.perf_counter() - t0, 1)}
    # the ranks' own word on where they ran: the start events of the notebook's job
    devices = set()
    for events in home.rglob("events.jsonl"):
        for line in events.read_text().splitlines():
            try:
                ev = json.loads(line[line.find("{"):])
            except ValueError:
                continue
            if isinstance(ev, dict) and ev.get("kind") == "start":
                devices.add(str(ev.get("device")))
    out["rank_devices"] = sorted(devices)
    out["ok"] = proc.returncode == 0 and bool(devices) and all(d.startswith("cuda") for d in devices)
    if not out["ok"]:
        out["output_tail"] = (proc.stdout + proc.stderr)[-3000:]
        # why, where papermill's tail does not say: the supervisor's own lines (snapshots, exits)
        # and the error outputs of the executed notebook
        out["supervisor"] = [line for log in home.rglob("job.log") for line in log.read_text().splitlines()
                             if line.startswith("[lanenb-supervisor]")][-40:]
        for nb in (work / "nb").glob("*.ipynb"):
            cells = json.loads(nb.read_text()).get("cells", [])
            out.setdefault("errors", []).extend(
                "".join(o.get("traceback") or o.get("text") or [o.get("evalue", "")])[-1500:]
                for c in cells for o in c.get("outputs", [])
                if o.get("output_type") == "error" or o.get("name") == "stderr")
    return out


# ------------------------------------------------------------------------------- driver
def environment(dev: torch.device) -> dict:
    env: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "cpu": cpu_name(),
                           "host": socket.gethostname(), "mpirun": shutil.which("mpirun")}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        env.update(gpu=props.name, gpu_count=torch.cuda.device_count(), sms=props.multi_processor_count,
                   gpu_mem_gb=round(props.total_memory / 2**30, 1), cudnn=torch.backends.cudnn.version(),
                   bf16=torch.cuda.is_bf16_supported())
        try:
            env["nccl"] = str(torch.cuda.nccl.version())
        except Exception as exc:
            env["nccl"] = f"unknown ({type(exc).__name__})"
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    try:
        from lanenb_trainer.engines import horovod_available

        env["horovod"] = horovod_available()
    except Exception:
        env["horovod"] = False
    return env


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def summary_lines(report: dict) -> list[str]:
    """The short table printed last (the device reply carries the end of the output)."""
    out = []
    mp = report.get("message_passing") or {}
    for dtype, row in (mp.get("times_s") or {}).items():
        cells = "  ".join(f"{k} {(v * 1e3):.2f} ms" if isinstance(v, float) and k != "ours_over_floor"
                          else f"{k} {_fmt(v)}" for k, v in row.items())
        out.append(f"message passing {dtype} {mp.get('shape')}: {cells}")
    if mp:
        out.append(f"message passing float64 equality: max rel err {_fmt(mp.get('max_rel_err_f64'))} "
                   f"({'OK' if mp.get('ok_equal') else 'FAILED'})")
    tr = report.get("vgg16_training") or {}
    if tr:
        out.append(f"training images/s {tr.get('backbone')} {tr.get('size')} batch {tr.get('batch')}: "
                   + "  ".join(f"{k} {_fmt(v)}" for k, v in (tr.get("images_per_s") or {}).items()))
    inf = report.get("inference") or {}
    if inf:
        out.append(f"inference frames/s batch 1 {inf.get('dtype')}: "
                   + "  ".join(f"{k} {_fmt(v)}" for k, v in (inf.get("frames_per_s") or {}).items())
                   + f"  (goal >= 50: {inf.get('goal_50fps_met')})")
    lr = report.get("long_run") or {}
    if lr:
        out.append(f"long run {lr.get('backbone')} {lr.get('amp_dtype')}: {_fmt(lr.get('images_per_s'))} images/s, "
                   f"GPU util mean {_fmt(lr.get('gpu_util_mean'))}% (goal > 96), data wait "
                   f"{_fmt((lr.get('data_wait_share') or 0) * 100)}% (goal < 2), projected full TuSimple run "
                   f"{_fmt(lr.get('projected_full_run_h'))} h (guide: 1 V100 {GUIDE_1GPU_H} h)")
    for name in SECTIONS:
        sec = report.get(name)
        if isinstance(sec, dict):
            state = {True: "OK", False: "FAILED", None: "skipped"}[sec.get("ok")]
            why = sec.get("skipped") or sec.get("error") or ""
            out.append(f"{name:16s} {state:8s} {sec.get('seconds', '')} s {why}")
    return out


def write_report(path: Path | None, report: dict) -> None:
    if path is None:
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=480.0, help="seconds for all sections (default 480)")
    ap.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    ap.add_argument("--skip", nargs="+", choices=SECTIONS, default=[], help="leave these out")
    ap.add_argument("--json", type=Path, help="report file (default $OUT/gpu_check.json when OUT is set)")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny sizes: check the script itself")
    ap.add_argument("--steps", type=int, default=6, help="train_resume: steps before the stop")
    ap.add_argument("--mp-shape", type=int, nargs=4, default=[8, 128, 36, 100], metavar=("N", "C", "H", "W"))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--batch", type=int, default=16, help="vgg16 training batch")
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--long-steps", type=int, default=225)
    ap.add_argument("--long-frames", type=int, default=1200)
    ap.add_argument("--long-workers", type=int, default=8)
    ap.add_argument("--long-amp", default="bfloat16", choices=("float16", "bfloat16"))
    args = ap.parse_args(argv)
    if args.smoke:
        dev = torch.device("cpu")
    elif torch.cuda.is_available():
        dev = torch.device("cuda", 0)
    else:
        print(f"no CUDA device visible to torch {torch.__version__} (CPU: {cpu_name()}): nothing to check; "
              "--smoke checks the script on the CPU")
        return 2
    json_path = args.json or (Path(os.environ["OUT"]) / "gpu_check.json" if os.environ.get("OUT") else None)
    chosen = [s for s in (args.only or SECTIONS) if s not in args.skip]
    if args.smoke:
        chosen = [s for s in chosen if s != "quickstart"]
    report: dict[str, Any] = {"environment": environment(dev), "smoke": args.smoke}
    from lanenb_trainer.training.precision import configure_algorithms

    configure_algorithms(False)  # as the trainer runs: cuDNN autotunes each shape once
    print("environment:", json.dumps(report["environment"]), flush=True)
    write_report(json_path, report)
    deadline = time.monotonic() + args.budget
    small = args.smoke
    tiny: dict[str, Any] = dict(img_height=64, img_width=160, epochs=1) if small else {}
    # (name, estimated seconds, runner): a section starts only when its estimate fits the budget left;
    # the estimates are what each took on an H200 on 2026-11-27 (message passing: Triton's compiles)
    runners: dict[str, tuple[float, Callable[[Path], dict]]] = {
        "message_passing": (250, lambda w: check_message_passing(
            dev, (2, 16, 9, 12) if small else tuple(args.mp_shape), 3 if small else args.repeats)),
        "vgg16_training": (95, lambda w: check_training_throughput(
            dev, "small" if small else "vgg16", (64, 160) if small else (288, 800), 2 if small else args.batch,
            2 if small else args.iters)),
        "inference": (10, lambda w: check_inference(
            dev, "small" if small else "vgg16", (64, 160) if small else (288, 800), 3 if small else 50)),
        "train_resume": (40, lambda w: check_train_resume(w, dev, args.steps, timeout=240, **tiny)),
        "shared_gpu": (25, lambda w: check_shared_gpu(w, dev, timeout=180, **tiny)),
        "long_run": (80, lambda w: check_long_run(
            w, dev, backbone="small" if small else "vgg16", size=(64, 160) if small else (288, 800),
            frames=24 if small else args.long_frames, frame_size=(640, 360) if small else (1280, 720),
            batch=2 if small else args.batch, steps=12 if small else args.long_steps,
            workers=1 if small else args.long_workers, amp_dtype="bfloat16" if small else args.long_amp,
            timeout=max(60.0, deadline - time.monotonic() - 5))),
        "quickstart": (45, lambda w: check_quickstart(w, timeout=max(60.0, deadline - time.monotonic() - 5))),
    }
    ok = True
    with tempfile.TemporaryDirectory(prefix="lanenb-gpu-") as tmp:
        for name in chosen:
            estimate, run = runners[name]
            left = deadline - time.monotonic()
            if left < (5 if small else estimate):
                report[name] = {"ok": None, "skipped": f"budget: {left:.0f} s left, needs ~{estimate:.0f} s"}
                print(f"{name}: skipped ({report[name]['skipped']})", flush=True)
                continue
            print(f"{name}: running ({left:.0f} s of budget left)", flush=True)
            t0 = time.perf_counter()
            work = Path(tmp) / name
            work.mkdir()
            try:
                result = run(work)
            except Exception as exc:
                import traceback

                result = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc()[-3000:]}
            result["seconds"] = round(time.perf_counter() - t0, 1)
            report[name] = result
            ok &= result.get("ok") is not False
            print(f"{name}: {json.dumps(result, default=str)[:2000]}", flush=True)
            write_report(json_path, report)
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    print("\n".join(summary_lines(report)))
    print(f"GPU: {report['environment'].get('gpu', 'none (smoke)')}  CPU: {report['environment']['cpu']}")
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
