"""``lanenb eval``: score a TuSimple submission with the official LaneEval semantics.

The last stdout line is always the machine-readable ``{"accuracy": a, "fp": f, "fn": n}``
so scripts can ``tail -n1``; everything above it is for people.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lanenb_trainer.evaluation import EvalError, EvalResult, evaluate_files, write_json_lines


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        help="score TuSimple predictions (official LaneEval semantics)",
        description=(
            "Score a TuSimple prediction file (JSON lines: raw_file, lanes, run_time) against "
            "a label file. Prints a summary; the last line is "
            '{"accuracy": a, "fp": f, "fn": n}.'
        ),
    )
    p.add_argument("--format", choices=("tusimple", "culane"), default="tusimple",
                   help="tusimple (default): PRED.json vs GT.json; culane: --pred is a folder of .lines.txt "
                        "files, --gt the CULane root (official F1 at IoU 0.5, 30 px lanes)")
    p.add_argument("--pred", required=True, type=Path, metavar="PRED.json", help="predictions (JSON lines)")
    p.add_argument("--gt", required=True, type=Path, metavar="GT.json", help="ground truth, e.g. test_label.json")
    p.add_argument("--list", default="list/test.txt", metavar="LIST.txt",
                   help="culane: the frames to score, relative to --gt (default list/test.txt)")
    p.add_argument(
        "--per-frame",
        type=Path,
        metavar="OUT.json",
        help="also write one JSON line of scores per frame (for the notebook viewer)",
    )
    p.add_argument("--worst", type=int, default=5, metavar="N", help="list the N worst frames (default 5)")
    p.set_defaults(func=run)


def format_summary(result: EvalResult, worst: int = 5) -> list[str]:
    """Human-readable lines: the three official numbers, penalties and the worst frames."""
    n = len(result.frames)
    penalised = [f for f in result.frames if f.penalty]
    lines = [
        f"frames      {n}",
        f"accuracy    {result.accuracy * 100:.2f} %",
        f"FP          {result.fp:.4f}",
        f"FN          {result.fn:.4f}",
    ]
    if penalised:
        lines.append(f"penalised   {len(penalised)} frame(s) scored (0, 0, 1), e.g. "
                     f"{penalised[0].raw_file}: {penalised[0].penalty}")
    if worst > 0:
        ranked = result.worst(worst)
        lines.append(f"worst {len(ranked)} frame(s):")
        for f in ranked:
            why = f" [{f.penalty}]" if f.penalty else ""
            lines.append(
                f"  {f.raw_file}  acc {f.accuracy:.3f}  fp {f.fp:.2f}  fn {f.fn:.2f}  "
                f"(gt {f.num_gt}, pred {f.num_pred}){why}"
            )
    return lines


def run_culane(args: argparse.Namespace) -> int:
    from lanenb_trainer.evaluation.culane_eval import evaluate_culane

    try:
        result = evaluate_culane(args.gt, args.pred, list_file=args.list)
    except EvalError as exc:
        print(f"lanenb eval: error: {exc}", file=sys.stderr)
        return 1
    print(f"frames      {result.frames}")
    print(f"F1          {result.f1 * 100:.2f} %  (precision {result.precision * 100:.2f} %, "
          f"recall {result.recall * 100:.2f} %; TP {result.tp}, FP {result.fp}, FN {result.fn})")
    for name, c in result.categories.items():
        print(f"  {name:<16} F1 {c.f1 * 100:6.2f} %  (FP {c.fp}, {c.frames} frames)")
    print(json.dumps(result.to_dict()))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.format == "culane":
        return run_culane(args)
    if args.worst < 0:
        print(f"lanenb eval: error: --worst must be >= 0, got {args.worst}", file=sys.stderr)
        return 1
    try:
        result = evaluate_files(args.pred, args.gt)
    except EvalError as exc:
        print(f"lanenb eval: error: {exc}", file=sys.stderr)
        return 1
    if args.per_frame is not None:
        try:
            write_json_lines(args.per_frame, (f.to_dict() for f in result.frames))
        except OSError as exc:
            print(f"lanenb eval: error: cannot write --per-frame {args.per_frame}: {exc.strerror}", file=sys.stderr)
            return 1
    for line in format_summary(result, args.worst):
        print(line)
    if args.per_frame is not None:
        print(f"per-frame scores: {args.per_frame}")
    print(json.dumps(result.summary()))
    return 0
