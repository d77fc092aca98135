"""TuSimple evaluation (official LaneEval semantics, vectorised) and submission files."""

from .jsonl import EvalError, read_json_lines, write_json_lines
from .lane_eval import EvalResult, FrameScore, evaluate, evaluate_files

__all__ = [
    "EvalError",
    "EvalResult",
    "FrameScore",
    "evaluate",
    "evaluate_files",
    "read_json_lines",
    "write_json_lines",
]
