"""GPU check: the CUDA paths that CPU machines never run, in one script that prints figures.

Run it whenever a GPU machine is available (``bench/gpu_check.py``; about 2-4 minutes):

1. a 1-GPU ``ddp`` training run with AMP (real ``mpirun`` rank, synthetic TuSimple frames),
   stopped by ``--max-steps``, then ``--resume``d to the end: both exit cleanly, the resumed
   run starts where the first stopped, every logged loss is finite (AMP's scaler works);
2. NVML: the rank's ``system`` events carry ``gpu_util``, ``gpu_mem_mb``,
   ``gpu_mem_total_mb`` (what the notebook's per-rank charts draw); step timing: the run's
   ``timing`` events (CUDA events read once per window) name the CUDA device and have
   ``h2d_s`` and ``compute_s`` > 0, and the phases do not exceed the step by more than 20%;
3. message passing on CUDA: the custom autograd path equals the plain per-slice loop
   (float64: output and every gradient within 1e-9 relative) and its fwd+bwd speed ratio in
   float32 (goal: at least as fast as the loop);
4. training throughput of ``scnn_vgg16`` at 288x800 (images/s, AMP on and off).

Exit status 0 when every check passed, 1 when one failed, 2 when there is no CUDA device.
Figures are printed with the GPU's and the CPU's names; compare ratios within one run.

    python bench/gpu_check.py                  # everything
    python bench/gpu_check.py --skip-training  # only the in-process checks (3, 4)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import cpu_name


def _events(lines, kind: str, rank: int | None = None) -> list:
    return [ln.event for ln in lines
            if ln.event is not None and ln.event.kind == kind and (rank is None or ln.event.rank == rank)]


def check_training(work: Path, steps: int) -> dict:
    """1-GPU ddp run with AMP, stopped and resumed; returns findings (``ok`` per check)."""
    from lanenb.launch.mpirun import launch_env, run_local
    from lanenb_trainer.config import TrainConfig
    from lanenb_trainer.data.synth import synthesize

    data = work / "synth"
    synthesize(data, 48, seed=1, width=640, height=360, test_fraction=0.25, progress=False)
    run_dir = work / "run"
    common = dict(data=str(data), run_dir=str(run_dir), engine="ddp", backbone="small", amp=True,
                  img_height=144, img_width=400, batch_size=4, val_batch_size=8, epochs=2,
                  log_every=1, system_interval=0.5, warmup_steps=2, timing_every=2)
    out: dict = {}
    first: list = []
    code1 = run_local(1, TrainConfig(**common, max_steps=steps).validate().to_argv(),
                      env=launch_env(), on_line=first.append, grace=10)
    second: list = []
    code2 = run_local(1, TrainConfig(**common, resume=True).validate().to_argv(),
                      env=launch_env(), on_line=second.append, grace=10)
    start1, start2 = _events(first, "start", 0), _events(second, "start", 0)
    end1, end2 = _events(first, "end", 0), _events(second, "end", 0)
    out["device"] = start1[0]["device"] if start1 else None
    out["amp"] = start1[0]["amp"] if start1 else None
    out["first_run"] = {"exit": code1, "status": end1[-1]["status"] if end1 else None}
    out["resumed_run"] = {"exit": code2, "status": end2[-1]["status"] if end2 else None,
                          "resumed_from": start2[0]["resumed_from"] if start2 else None}
    losses = [ev["loss"] for ev in _events(first, "step") + _events(second, "step")]
    out["losses_finite"] = bool(losses) and all(v is not None and math.isfinite(v) for v in losses)
    resumed = out["resumed_run"]["resumed_from"] or {}
    out["ok_training"] = (code1 == 0 and code2 == 0 and out["device"] not in (None, "cpu")
                          and out["first_run"]["status"] == "stopped"
                          and out["resumed_run"]["status"] == "completed"
                          and resumed.get("step") == steps and out["losses_finite"])
    systems = _events(first, "system", 0) + _events(second, "system", 0)
    nvml = ("gpu_util", "gpu_mem_mb", "gpu_mem_total_mb")
    out["nvml_fields"] = {k: any(k in ev.data for ev in systems) for k in nvml}
    out["ok_nvml"] = bool(systems) and all(out["nvml_fields"].values())
    timing = _events(first, "timing", 0) + _events(second, "timing", 0)
    phases = ("data_s", "h2d_s", "compute_s", "exchange_s", "optimizer_s")
    out["timing"] = [{k: ev.get(k) for k in ("step", "device", "step_s", *phases)} for ev in timing[-3:]]
    out["ok_timing"] = bool(timing) and all(
        str(ev["device"]).startswith("cuda") and ev["h2d_s"] > 0 and ev["compute_s"] > 0
        and sum(ev[k] for k in phases) <= 1.2 * ev["step_s"] for ev in timing)
    if not out["ok_training"]:
        tail = [ln.tagged() for ln in (first + second)[-30:]]
        out["log_tail"] = tail
    return out


def check_message_passing(shape: tuple[int, int, int, int], repeats: int) -> dict:
    """CUDA: custom Function vs the plain loop, equality in float64 and speed in float32."""
    from lanenb_trainer.models.message_passing import MessagePassing, plain_message_passing

    dev = torch.device("cuda")
    n, c, h, w = shape

    def run(impl, mp, x, g):
        x.grad = None
        mp.zero_grad(set_to_none=True)
        out = impl(x)
        out.backward(g)
        return [out.detach(), x.grad] + [m.weight.grad for m in (mp.down, mp.up, mp.right, mp.left)]

    def plain(mp):
        return lambda t: plain_message_passing(t, mp.down.weight, mp.up.weight, mp.right.weight, mp.left.weight)

    torch.manual_seed(0)
    mp = MessagePassing(c, 9).to(dev, torch.float64)
    with torch.no_grad():
        for conv in (mp.down, mp.up, mp.right, mp.left):
            conv.weight.normal_(0.0, 1.0 / (c * 9) ** 0.5)
    x = torch.randn(n, c, h, w, device=dev, dtype=torch.float64, requires_grad=True)
    g = torch.randn(n, c, h, w, device=dev, dtype=torch.float64)
    ours = [t.clone() for t in run(mp, mp, x, g)]
    ref = run(plain(mp), mp, x, g)
    err = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-300)) for a, b in zip(ours, ref))

    mp32 = mp.float()
    x32 = x.detach().float().requires_grad_()
    g32 = g.float()

    def timed(impl) -> float:
        best = float("inf")
        run(impl, mp32, x32, g32)
        for _ in range(repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run(impl, mp32, x32, g32)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        return best

    t_ours, t_loop = timed(mp32), timed(plain(mp32))
    return {"shape": list(shape), "max_rel_err_f64": err, "ours_s": t_ours, "loop_s": t_loop,
            "loop_over_ours": t_loop / t_ours, "ok_equal": err <= 1e-9,
            "ok_speed": t_loop / t_ours >= 1.0}


def check_vgg16_throughput(batch: int, iters: int) -> dict:
    """Images/s of scnn_vgg16 training steps at 288x800 (AMP on and off)."""
    out: dict = {"batch": batch}
    for amp in (True, False):
        key = "amp" if amp else "fp32"
        out[f"images_per_s_{key}"], out[f"loss_finite_{key}"] = _vgg16_rate(batch, iters, amp)
        torch.cuda.empty_cache()
    out["ok"] = out["loss_finite_amp"] and out["loss_finite_fp32"]
    return out


def _vgg16_rate(batch: int, iters: int, amp: bool) -> tuple[float, bool]:
    """(images/s, every loss finite) of ``iters`` timed training steps after 3 warm-up steps."""
    from lanenb_trainer.models import build_model
    from lanenb_trainer.recipe import scnn_loss

    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = build_model("vgg16", input_size=(288, 800)).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    x = torch.randn(batch, 3, 288, 800, device=dev)
    mask = torch.randint(0, 5, (batch, 288, 800), device=dev)
    exist = torch.randint(0, 2, (batch, 4), device=dev).float()

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", enabled=amp):
            seg, ex = model(x)
            loss, _, _ = scnn_loss(seg, ex, mask, exist)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return float(loss)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    losses = [step() for _ in range(iters)]
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    return batch * iters / dt, all(math.isfinite(v) for v in losses)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-training", action="store_true", help="skip the mpirun training/resume check")
    ap.add_argument("--steps", type=int, default=6, help="steps before the stop (then --resume)")
    ap.add_argument("--shape", type=int, nargs=4, default=[8, 128, 36, 100], metavar=("N", "C", "H", "W"))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8, help="vgg16 batch size")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"no CUDA device visible to torch {torch.__version__} (CPU: {cpu_name()}): nothing to check")
        return 2
    print(f"GPU: {torch.cuda.get_device_name(0)}  torch {torch.__version__}  CUDA {torch.version.cuda}  "
          f"CPU: {cpu_name()}")
    report: dict = {}
    ok = True
    if not args.skip_training:
        with tempfile.TemporaryDirectory(prefix="lanenb-gpu-") as tmp:
            report["training"] = tr = check_training(Path(tmp), args.steps)
        print(f"1-GPU ddp run + resume (AMP {tr['amp']}, {tr['device']}): "
              f"{'OK' if tr['ok_training'] else 'FAILED'}  first {tr['first_run']}  resumed {tr['resumed_run']}  "
              f"losses finite {tr['losses_finite']}")
        print(f"NVML fields in system events: {tr['nvml_fields']}  {'OK' if tr['ok_nvml'] else 'FAILED'}")
        print(f"timing events (CUDA events): {'OK' if tr['ok_timing'] else 'FAILED'}  last {tr['timing']}")
        for line in tr.get("log_tail", []):
            print("   ", line)
        ok &= tr["ok_training"] and tr["ok_nvml"] and tr["ok_timing"]
    report["message_passing"] = mp = check_message_passing(tuple(args.shape), args.repeats)
    print(f"message passing on CUDA {mp['shape']}: max rel err vs loop (float64) {mp['max_rel_err_f64']:.1e} "
          f"{'OK' if mp['ok_equal'] else 'FAILED'}; fwd+bwd float32 ours {mp['ours_s'] * 1e3:.1f} ms, "
          f"loop {mp['loop_s'] * 1e3:.1f} ms, loop/ours {mp['loop_over_ours']:.2f}x (goal >= 1.0) "
          f"{'OK' if mp['ok_speed'] else 'FAILED'}")
    ok &= mp["ok_equal"] and mp["ok_speed"]
    report["vgg16"] = vg = check_vgg16_throughput(args.batch, args.iters)
    print(f"scnn_vgg16 288x800 training, batch {vg['batch']}: {vg['images_per_s_amp']:.1f} images/s with AMP, "
          f"{vg['images_per_s_fp32']:.1f} images/s fp32; losses finite {vg['ok']}")
    ok &= vg["ok"]
    print(json.dumps(report, default=str))
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
