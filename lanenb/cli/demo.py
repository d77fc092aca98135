"""``lanenb demo``: the whole workflow on this machine in a few minutes.

Synthetic TuSimple-layout data → dataset check → preview image → a short real 2-rank
training run (small backbone, mpirun) → test evaluation with the exact TuSimple evaluator.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lanenb.cli import describe
from lanenb.cli.train import ConsoleRenderer, launch_in_console
from lanenb_trainer.config import ConfigError, TrainConfig

DEMO_TRAINING = dict(epochs=10, batch_size=4, backbone="small", img_height=128, img_width=320, lr=0.02,
                     warmup_steps=10, log_every=5, val_batch_size=16)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="synthetic data + a short real 2-rank training run",
                              description=describe(__doc__))
    p.add_argument("--out", default="demo", help="output folder (data/, preview.png, run/); default ./demo")
    p.add_argument("--frames", type=int, default=200, help="synthetic frames (default 200)")
    p.add_argument("--processes", "-np", type=int, default=2, help="ranks (default 2)")
    p.add_argument("--epochs", type=int, default=DEMO_TRAINING["epochs"])
    p.add_argument("--engine", default="auto", help="auto|horovod|ddp")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    out = Path(args.out)
    data = out / "data"
    if args.frames < 20:
        print(f"lanenb demo: error: --frames must be >= 20, got {args.frames}", file=sys.stderr)
        return 2
    if args.processes < 1:
        print(f"lanenb demo: error: --processes must be >= 1, got {args.processes}", file=sys.stderr)
        return 2

    # 1. data (reused when a previous demo left it there)
    from lanenb_trainer.data.synth import synthesize

    if (data / "label_data_synth.json").is_file():
        print(f"1/5 data: reusing {data}")
    else:
        print(f"1/5 data: synthesising {args.frames} frames (640x360) into {data}")
        try:
            synthesize(data, args.frames, seed=args.seed, width=640, height=360, test_fraction=0.2, progress=True)
        except (FileExistsError, ValueError) as exc:
            print(f"lanenb demo: error: {exc}", file=sys.stderr)
            return 2

    # 2. check
    from lanenb_trainer.data.check import check_dataset

    problems = check_dataset(data)
    if problems:
        for p in problems[:20]:
            print(f"  {p}", file=sys.stderr)
        print(f"lanenb demo: error: {len(problems)} problem(s) in {data}", file=sys.stderr)
        return 1
    print("2/5 check: no problems")

    # 3. preview
    from lanenb_trainer.data.preview import preview_grid, write_png

    preview = write_png(out / "preview.png", preview_grid(data, n=8, split="train", seed=args.seed))
    print(f"3/5 preview: {preview}")

    # 4. train
    run_dir = out / "run"
    try:
        cfg = TrainConfig(data=str(data), run_dir=str(run_dir), engine=args.engine, seed=args.seed,
                          **{**DEMO_TRAINING, "epochs": args.epochs}).validate()
    except ConfigError as exc:
        print(f"lanenb demo: error: {exc}", file=sys.stderr)
        return 2
    print(f"4/5 train: {args.processes} ranks, {cfg.epochs} epochs, backbone {cfg.backbone}, "
          f"{cfg.img_height}x{cfg.img_width}, run dir {run_dir}")
    code = launch_in_console(cfg, args.processes, ConsoleRenderer(), prog="lanenb demo")
    if code != 0:
        print(f"lanenb demo: training failed (exit status {code}); events in {run_dir}/events.jsonl",
              file=sys.stderr)
        return code

    # 5. metrics
    metrics = json.loads((run_dir / "metrics.json").read_text())
    test = metrics.get("test") or {}
    print(f"5/5 test set ({test.get('frames')} frames): accuracy {test.get('accuracy', 0):.4f}  "
          f"FP {test.get('fp', 0):.4f}  FN {test.get('fn', 0):.4f}  "
          f"[{metrics['world_size']} ranks, {metrics['engine']}, {metrics['duration_s']:.0f}s]")
    pred_file = run_dir / "predictions" / "test.json"
    from lanenb_trainer.evaluation.jsonl import read_prediction_lanes

    shown = write_png(out / "predictions.png", preview_grid(
        data, n=8, split="test", seed=args.seed, predictions=read_prediction_lanes(pred_file)))
    print(f"predictions: {pred_file} (drawn over the ground truth in {shown})   "
          f"checkpoints: {run_dir}/checkpoints/")
    return 0

