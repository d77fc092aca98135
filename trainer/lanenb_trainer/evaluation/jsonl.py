"""JSON-lines files for TuSimple predictions: read with line numbers (so every error can
name the line a user has to fix) and write atomically (a crashed run never leaves a
half-written submission behind)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lanenb_trainer.atomic import atomic_open

from ..errors import UserError


class EvalError(UserError, ValueError):
    """A prediction or ground-truth file the evaluator cannot score; the message names
    the file, the line and the frame so the user knows what to fix."""


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for messages users can act on."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def read_json_lines(path: str | os.PathLike[str], what: str) -> list[tuple[int, dict[str, Any]]]:
    """Return ``(line_number, object)`` for every non-blank line of a JSON-lines file.

    ``what`` ("prediction file", "ground-truth file") is only used in error messages.
    """
    p = Path(path)
    if not p.exists():
        raise EvalError(f"{what} not found: {p}")
    if not p.is_file():
        raise EvalError(f"{what} is not a file: {p}")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise EvalError(f"{what} {p} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise EvalError(f"cannot read {what} {p}: {exc.strerror}") from None
    out: list[tuple[int, dict[str, Any]]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvalError(
                f"{p}:{line_no}: {what} is not JSON lines (one JSON object per line): "
                f"{exc.msg} at column {exc.colno}"
            ) from None
        if not isinstance(obj, dict):
            raise EvalError(
                f"{p}:{line_no}: {what} is not JSON lines: expected one JSON object per line, "
                f"got a JSON {json_type(obj)}"
            )
        out.append((line_no, obj))
    if not out:
        raise EvalError(f"{what} {p} is empty: expected one JSON object per frame")
    return out


def write_json_lines(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> Path:
    """Write one compact JSON object per line via a temp file + ``os.replace``."""
    with atomic_open(path, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, separators=(",", ":")))
            fh.write("\n")
    return Path(path)


def read_prediction_lanes(path: str | os.PathLike[str]) -> dict[str, list]:
    """raw_file -> predicted lanes of a TuSimple submission file, for drawing them."""
    out: dict[str, list] = {}
    for line, rec in read_json_lines(path, "prediction file"):
        if not isinstance(rec.get("raw_file"), str) or not isinstance(rec.get("lanes"), list):
            raise EvalError(f"{path}:{line}: a prediction needs a 'raw_file' string and a 'lanes' list")
        out[rec["raw_file"]] = rec["lanes"]
    return out
