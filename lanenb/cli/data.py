"""``lanenb data fetch|check|synth|preview``: get, validate, generate and look at datasets."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path



def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help="check, synthesise or preview TuSimple datasets")
    sub = data.add_subparsers(dest="data_command", required=True, metavar="SUBCOMMAND")

    from lanenb_trainer.datasets.fetch import add_fetch_arguments

    fetch = sub.add_parser("fetch", help="download + verify + safely extract TuSimple (or CULane) into --to",
                           description="Download the official archives (resuming partial downloads), verify "
                                       "size/sha256, extract refusing paths that escape --to, run data check, "
                                       "and move the result into place. A complete --to is left alone.")
    add_fetch_arguments(fetch)
    fetch.set_defaults(func=cmd_fetch)

    check = sub.add_parser("check", help="validate labels and images; one FILE:LINE line per problem")
    check.add_argument("dir", help="dataset root (clips/ + label JSON-lines files)")
    check.add_argument("--quiet", action="store_true", help="no progress bar")
    check.set_defaults(func=cmd_check)

    synth = sub.add_parser("synth", help="write synthetic road scenes in the TuSimple layout")
    synth.add_argument("--out", required=True, help="output directory (new, empty, or a previous synth)")
    synth.add_argument("--frames", type=int, default=200, help="number of frames (default 200)")
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--width", type=int, default=1280)
    synth.add_argument("--height", type=int, default=720)
    synth.add_argument("--test-fraction", type=float, default=0.2,
                       help="share of frames written to test_label.json (default 0.2)")
    synth.add_argument("--quiet", action="store_true", help="no progress bar")
    synth.set_defaults(func=cmd_synth)

    preview = sub.add_parser("preview", help="PNG grid of frames with ground-truth lanes")
    preview.add_argument("dir", help="dataset root")
    preview.add_argument("--out", required=True, help="PNG file to write")
    preview.add_argument("--n", type=int, default=8, help="number of frames (default 8)")
    preview.add_argument("--split", default="train", choices=("train", "val", "test"))
    preview.add_argument("--seed", type=int, default=0, help="which frames to pick")
    preview.add_argument("--pred", help="TuSimple predictions JSON lines (e.g. RUN/predictions/test.json): "
                         "draw them in colour over thin white ground truth")
    preview.set_defaults(func=cmd_preview)


def cmd_fetch(args: argparse.Namespace) -> int:
    from lanenb_trainer.datasets.errors import FetchError
    from lanenb_trainer.datasets.fetch import run_from_args

    try:
        result = run_from_args(args)
    except FetchError as exc:
        print(f"lanenb data fetch: error: {exc}", file=sys.stderr)
        return 2
    print(result, file=sys.stderr)
    print(json.dumps(result.to_dict()))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from lanenb_trainer.data.culane import check_culane, is_culane_root
    from lanenb_trainer.data.labels import check_dataset

    check = check_culane if is_culane_root(args.dir) else check_dataset  # CULane: list/*.txt + .lines.txt
    problems = check(args.dir, progress=not args.quiet and sys.stderr.isatty())
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in {args.dir}", file=sys.stderr)
        return 1
    print(f"{args.dir}: OK", file=sys.stderr)
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    from lanenb_trainer.data.synth import synthesize

    try:
        summary = synthesize(args.out, args.frames, seed=args.seed, width=args.width,
                             height=args.height, test_fraction=args.test_fraction,
                             progress=not args.quiet)
    except (ValueError, FileExistsError, NotADirectoryError) as exc:
        print(f"lanenb data synth: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


def cmd_preview(args: argparse.Namespace) -> int:

    from lanenb_trainer.data.labels import LabelError
    from lanenb_trainer.data.preview import preview_grid, write_png
    from lanenb_trainer.evaluation.jsonl import read_prediction_lanes

    out = Path(args.out)
    if out.suffix.lower() != ".png":
        print(f"lanenb data preview: error: --out must end in .png; got {args.out}", file=sys.stderr)
        return 2
    try:
        predictions = read_prediction_lanes(args.pred) if args.pred else None
        grid = preview_grid(args.dir, n=args.n, split=args.split, seed=args.seed,
                            predictions=predictions)
    except (LabelError, ValueError, FileNotFoundError) as exc:
        print(f"lanenb data preview: error: {exc}", file=sys.stderr)
        return 2
    write_png(out, grid)
    print(f"wrote {out} ({grid.shape[1]}x{grid.shape[0]})", file=sys.stderr)
    return 0

