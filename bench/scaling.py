"""Weak scaling of data-parallel SCNN training: 1 rank vs N ranks, 1 thread each.

Each rank trains on random tensors of a fixed per-rank batch (no data loading, so only
compute and gradient exchange are measured). Two loops are timed per rank count:

* phased: forward+backward without exchange | explicit gradient all-reduce | optimizer step,
  so the share of step time spent exchanging gradients is measured directly;
* production: the engine's own step (DDP overlaps the all-reduce with backward; Horovod's
  DistributedOptimizer does too) - this gives the efficiency users see.

Weak-scaling efficiency = step time at 1 rank / step time at N ranks (ideal 1.0; goal >= 0.90).
On a machine with fewer free cores than ranks the figure measures the contention, not the
engine: check ``nproc`` and the load average printed with the result.

    python bench/scaling.py                      # ddp, small backbone, 128x320, batch 4
    python bench/scaling.py --engine horovod --ranks 2 --steps 20 --backbone resnet18
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def worker(args: argparse.Namespace) -> None:
    import torch

    from lanenb_trainer.engines import get_engine
    from lanenb_trainer.models import build_model
    from lanenb_trainer.recipe import scnn_loss

    os.environ["LANENB_THREADS"] = "1"
    eng = get_engine(args.engine).init()
    torch.manual_seed(0)
    h, w = args.height, args.width
    x = torch.randn(args.batch_size, 3, h, w)
    mask = torch.randint(0, 5, (args.batch_size, h, w))
    exist = torch.randint(0, 2, (args.batch_size, 4)).float()

    def timed(fn):
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    # -- phased loop: plain model + optimizer, exchange done explicitly -------------------
    model = build_model(args.backbone, num_lanes=4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    params = [p for p in model.parameters() if p.requires_grad]
    phases: dict[str, list[float]] = {"compute": [], "exchange": [], "optimizer": []}
    for i in range(args.warmup + args.steps):
        eng.barrier()

        def compute():
            opt.zero_grad(set_to_none=True)
            seg, ex = model(x)
            scnn_loss(seg, ex, mask, exist)[0].backward()

        tc = timed(compute)
        te = timed(lambda: eng.allreduce_gradients(params))
        to = timed(opt.step)
        if i >= args.warmup:
            phases["compute"].append(tc)
            phases["exchange"].append(te)
            phases["optimizer"].append(to)

    # -- production loop: the engine's wrapped model/optimizer ----------------------------
    model2 = build_model(args.backbone, num_lanes=4)
    opt2 = torch.optim.SGD(model2.parameters(), lr=1e-3, momentum=0.9)
    model2, opt2 = eng.prepare(model2, opt2)
    prod: list[float] = []
    for i in range(args.warmup + args.steps):
        eng.barrier()

        def step():
            seg, ex = model2(x)
            eng.backward_step(scnn_loss(seg, ex, mask, exist)[0], opt2)

        t = timed(step)
        if i >= args.warmup:
            prod.append(t)

    med = {k: statistics.median(v) for k, v in phases.items()}
    mine = {"rank": eng.rank, **med, "phased_step": sum(med.values()), "production_step": statistics.median(prod)}
    allr = eng.gather_objects(mine)
    if eng.rank == 0:
        Path(args.out).write_text(json.dumps({"world_size": eng.world_size, "ranks": allr,
                                              "parameters": sum(p.numel() for p in params)}))
    eng.shutdown()


def run(ranks: int, args: argparse.Namespace) -> dict:
    from lanenb.launch.mpirun import launch_env, run_local

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        worker_args = ["--worker", "--engine", args.engine, "--backbone", args.backbone,
                       "--batch-size", str(args.batch_size), "--height", str(args.height),
                       "--width", str(args.width), "--steps", str(args.steps), "--warmup", str(args.warmup),
                       "--out", str(out)]
        log: list[str] = []
        code = run_local(ranks, worker_args, env=launch_env(extra={"LANENB_THREADS": "1", "OMP_NUM_THREADS": "1"}),
                         on_line=lambda ln: log.append(ln.tagged()), program=[os.path.abspath(__file__)])
        if code != 0 or not out.exists():
            sys.exit(f"{ranks}-rank run failed (exit {code}):\n" + "\n".join(log[-40:]))
        return json.loads(out.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", default="ddp", choices=["ddp", "horovod"])
    p.add_argument("--backbone", default="small")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4, help="per rank (weak scaling)")
    p.add_argument("--height", type=int, default=128)
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return

    one, many = run(1, args), run(args.ranks, args)

    def worst(res, key):
        return max(r[key] for r in res["ranks"])

    n = args.ranks
    print(f"engine {args.engine}, backbone {args.backbone} ({one['parameters']:,} parameters), per-rank batch "
          f"{args.batch_size} at {args.height}x{args.width}, 1 thread/rank, {args.steps} timed steps; "
          f"nproc {os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
    for label, res in (("1 rank", one), (f"{n} ranks", many)):
        print(f"  {label:>8}: compute {worst(res, 'compute') * 1e3:7.1f} ms | exchange "
              f"{worst(res, 'exchange') * 1e3:6.1f} ms | optimizer {worst(res, 'optimizer') * 1e3:5.1f} ms | "
              f"phased step {worst(res, 'phased_step') * 1e3:7.1f} ms | production step "
              f"{worst(res, 'production_step') * 1e3:7.1f} ms")
    share = worst(many, "exchange") / worst(many, "phased_step")
    eff_phased = worst(one, "phased_step") / worst(many, "phased_step")
    eff_prod = worst(one, "production_step") / worst(many, "production_step")
    # what the exchange alone costs: 1-rank step + the measured N-rank exchange (no CPU contention)
    eff_comm = worst(one, "phased_step") / (worst(one, "phased_step") + worst(many, "exchange"))
    slowdown = worst(many, "compute") / worst(one, "compute")
    print(f"gradient exchange share of the {n}-rank step: {share:.1%}; compute per rank slowed "
          f"x{slowdown:.2f} by sharing the machine; exchange-bound efficiency {eff_comm:.3f}")
    print(f"weak-scaling efficiency ({n} vs 1 rank): production {eff_prod:.3f}, phased {eff_phased:.3f} "
          f"(goal >= 0.90) -> {'OK' if eff_prod >= 0.90 else 'BELOW GOAL'}")


if __name__ == "__main__":
    main()
