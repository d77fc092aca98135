"""``lanenb predict`` and ``lanenb export``: use a trained model outside training."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lanenb.analysis.headline import LAST, figure
from lanenb_trainer.errors import UserError
from lanenb_trainer.evaluation.lane_eval import latency_ms


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("predict", help="lanes on images, a video or a dataset split",
                              description="Run a trained SCNN: TuSimple submission JSON, drawn frames or MP4, "
                                          "and the official metrics when labels exist.")
    p.add_argument("--weights", required=True, help="run directory (best.pt, else last.pt) or checkpoint file")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--images", help="a folder (recursive), a glob pattern or one image")
    src.add_argument("--video", help="a video file OpenCV can read")
    src.add_argument("--data", help="a TuSimple dataset root (with --split)")
    p.add_argument("--split", default="test", choices=("train", "val", "test"), help="with --data (default test)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda[:N]")
    p.add_argument("--backbone", default=None, help="refuse a checkpoint of another backbone")
    p.add_argument("--no-draw", action="store_true", help="write only the predictions (images)")
    p.add_argument("--draw", type=int, default=20, help="frames drawn with --data (default 20)")
    p.set_defaults(func=cmd_predict)

    e = subparsers.add_parser("export", help="export a trained model to ONNX or TorchScript",
                              description="ONNX (opset >= 17, dynamic batch) or TorchScript, checked against "
                                          "eager PyTorch.")
    e.add_argument("--weights", required=True, help="run directory or checkpoint file")
    e.add_argument("--format", default="onnx", choices=("onnx", "torchscript"))
    e.add_argument("--out", default=None, help="output file (default beside the checkpoint)")
    e.add_argument("--img-height", type=int, default=None, help="input height (default: as trained)")
    e.add_argument("--img-width", type=int, default=None, help="input width (default: as trained)")
    e.add_argument("--opset", type=int, default=18, help="ONNX opset (>= 17; default 18)")
    e.set_defaults(func=cmd_export)


def cmd_predict(args: argparse.Namespace) -> int:
    from lanenb.inference.predict import (
        Predictor,
        list_images,
        predict_images,
        predict_split,
        predict_video,
        write_predictions,
    )

    out = Path(args.out)
    try:
        if args.batch_size < 1:
            raise UserError(f"--batch-size must be >= 1, got {args.batch_size}")
        model = Predictor(args.weights, device=args.device, backbone=args.backbone)
        print(f"model: {model.args['backbone']} at {model.input_size[0]}x{model.input_size[1]} from {model.path} "
              f"on {model.device}", flush=True)
        metrics = None
        if args.images:
            paths = list_images(args.images)
            root = Path(args.images) if Path(args.images).is_dir() else None
            lines = predict_images(model, paths, out, batch_size=args.batch_size, draw=not args.no_draw, root=root)
        elif args.video:
            lines, video = predict_video(model, Path(args.video), out, batch_size=args.batch_size)
            print(f"video with lanes: {video}")
        else:
            lines, metrics = predict_split(model, Path(args.data), args.split, out, batch_size=args.batch_size,
                                           draw=0 if args.no_draw else args.draw)
    except (UserError, OSError) as exc:
        print(f"lanenb predict: error: {exc}", file=sys.stderr)
        return 2
    pred_file = write_predictions(lines, out / "predictions.json")
    latency = latency_ms(line["run_time"] for line in lines)
    print(f"{len(lines)} frame(s): {pred_file}  (run_time per frame p50 {latency['latency_ms_p50']:.1f} ms, "
          f"p95 {latency['latency_ms_p95']:.1f} ms)")
    if metrics is not None:
        from lanenb_trainer.atomic import write_json

        write_json(out / "metrics.json", metrics)
        scored = figure(LAST, metrics)
        if scored is not None:
            print(f"{args.split} accuracy {scored.accuracy:.4f} (lanes scored alone, as the run's headline)"
                  + (f"; {scored.realtime}" if scored.realtime else ""))
        print(json.dumps(metrics))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from lanenb.inference.export import export

    try:
        result = export(args.weights, args.format, args.out, img_height=args.img_height, img_width=args.img_width,
                        opset=args.opset)
    except (UserError, OSError) as exc:
        print(f"lanenb export: error: {exc}", file=sys.stderr)
        return 2
    print(f"{result.format}: {result.path} (input {result.input_size[0]}x{result.input_size[1]}, dynamic batch; "
          f"max |logit difference| vs PyTorch {result.max_abs_diff:.2e})")
    return 0
