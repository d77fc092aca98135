"""TuSimple label files: parsing and validation, shared by the reader and ``lanenb data check``.

A label file holds one JSON object per line::

    {"lanes": [[x or -2 per h_sample], ...], "h_samples": [y, ...], "raw_file": "clips/.../20.jpg"}

Coordinates are pixels of the frame the label belongs to (1280x720 in the official data, but
any size is accepted). ``-2`` marks "no lane point on this row".

The reader and the checker run the *same* validation code so a dataset that passes
``lanenb data check`` never fails in training, and a training failure names the same
``FILE:LINE: message`` the checker would have printed. Nothing here ever writes to a dataset.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..errors import UserError

__all__ = [
    "LaneRecord",
    "Problem",
    "LabelError",
    "NO_POINT",
    "read_label_file",
    "check_image",
    "load_image",
]

NO_POINT = -2
REQUIRED_KEYS = ("lanes", "h_samples", "raw_file")


@dataclass
class LaneRecord:
    """One labelled frame. ``source``/``line`` say where it came from, for error messages."""

    raw_file: str
    lanes: list[list[int]]
    h_samples: list[int]
    source: str = ""
    line: int = 0

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


@dataclass(frozen=True)
class Problem:
    """One validation finding; ``str()`` is the ``FILE:LINE: message`` line the CLI prints.

    ``line`` is 1-based; 0 means the problem concerns a whole directory (e.g. no label files).
    """

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


class LabelError(UserError, ValueError):
    """A label or image problem, message ``FILE:LINE: message``."""

    def __init__(self, problem: Problem):
        super().__init__(str(problem))
        self.problem = problem


# --------------------------------------------------------------------------- images


def _read_bytes(path: Path) -> tuple[bytes | None, str | None]:
    if not path.exists():
        return None, f"image not found: {path}"
    try:
        with open(path, "rb") as fh:
            return fh.read(), None
    except OSError as exc:
        return None, f"image unreadable: {path} ({exc.strerror or exc})"


def _decode(data: bytes, path: Path) -> tuple[np.ndarray | None, str | None]:
    if not data:
        return None, f"image is empty (0 bytes): {path}"
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        return None, f"image cannot be decoded (corrupt or not an image): {path}"
    if data[:2] == b"\xff\xd8" and b"\xff\xd9" not in data[-64:]:
        # libjpeg decodes a truncated file with only a warning; a grey bottom half is not data.
        return None, f"image is a truncated JPEG (no end-of-image marker): {path}"
    return img, None


def check_image(path: str | os.PathLike) -> tuple[tuple[int, int] | None, str | None]:
    """Decode ``path`` fully; returns ``((h, w), None)`` or ``(None, message)``."""
    path = Path(path)
    data, err = _read_bytes(path)  # exactly one of the pair is None
    if data is None:
        return None, err
    img, err = _decode(data, path)
    if img is None:
        return None, err
    return (int(img.shape[0]), int(img.shape[1])), None


def load_image(path: str | os.PathLike, flags: int = cv2.IMREAD_COLOR) -> np.ndarray:
    """Decode an image (BGR) or raise ``FileNotFoundError``/``ValueError`` naming the path."""
    path = Path(path)
    img = cv2.imread(str(path), flags)
    if img is None:
        data, err = _read_bytes(path)
        if data is not None:
            _, err = _decode(data, path)
        err = err or f"image cannot be decoded (corrupt or not an image): {path}"
        raise (FileNotFoundError(err) if "not found" in err else ValueError(err))
    return img


# --------------------------------------------------------------------------- one line


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _validate_obj(obj: object, size: tuple[int, int] | None) -> list[str]:
    """Messages for one parsed line; ``size`` (h, w) enables the upper bounds checks."""
    if not isinstance(obj, dict):
        return [f"expected a JSON object per line, got {type(obj).__name__}"]
    msgs = [f"missing key '{k}'" for k in REQUIRED_KEYS if k not in obj]
    if msgs:
        return msgs
    raw, lanes, hs = obj["raw_file"], obj["lanes"], obj["h_samples"]
    if not isinstance(raw, str) or not raw:
        msgs.append(f"'raw_file' must be a non-empty string, got {raw!r}")
    elif os.path.isabs(raw) or ".." in Path(raw).parts:
        msgs.append(f"'raw_file' must be a relative path inside the dataset root, got {raw!r}")
    if not isinstance(hs, list) or not all(_is_int(y) for y in hs):
        msgs.append("'h_samples' must be a list of integers")
        return msgs
    if not isinstance(lanes, list) or not all(
        isinstance(lane, list) and all(_is_int(x) for x in lane) for lane in lanes
    ):
        msgs.append("'lanes' must be a list of lists of integers")
        return msgs
    if not hs:
        msgs.append("'h_samples' is empty")
    for i in range(1, len(hs)):
        if hs[i] == hs[i - 1]:
            msgs.append(f"duplicate h_sample {hs[i]} at index {i}")
            break
        if hs[i] < hs[i - 1]:
            msgs.append(f"h_samples not increasing: {hs[i]} follows {hs[i - 1]} at index {i}")
            break
    height = size[0] if size else None
    bad_y = [y for y in hs if y < 0 or (height is not None and y >= height)]
    if bad_y:
        limit = f"0..{height - 1}" if height is not None else ">= 0"
        msgs.append(f"h_sample {bad_y[0]} is outside the image rows ({limit})")
    width = size[1] if size else None
    for li, lane in enumerate(lanes, start=1):
        if len(lane) != len(hs):
            msgs.append(f"lane {li} has {len(lane)} x values but h_samples has {len(hs)}")
            continue
        for x, y in zip(lane, hs):
            if x == NO_POINT:
                continue
            if x < 0 or (width is not None and x >= width):
                limit = f"0..{width - 1}" if width is not None else ">= 0"
                msgs.append(
                    f"lane {li} x={x} at y={y} is outside the image ({limit}); use -2 for no point"
                )
                break
    return msgs


def _file_level_problem(path: Path, text: str) -> Problem | None:
    """Spot files that are JSON but not JSON *lines* (an array, a pretty-printed object)."""
    src = str(path)
    if not text.strip():
        return Problem(src, 1, "empty label file (expected one JSON object per line)")
    stripped = text.lstrip()
    n_lines = sum(1 for ln in text.splitlines() if ln.strip())
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
        if stripped.startswith("["):
            return Problem(src, 1, "label file is not JSON lines: it starts with '[' "
                           "(a JSON array); write one JSON object per line")
    if isinstance(whole, list):
        return Problem(src, 1, "label file is not JSON lines: it holds one JSON array; "
                       "write one JSON object per line")
    if whole is not None and n_lines > 1:
        return Problem(src, 1, f"label file is not JSON lines: one JSON document spread over "
                       f"{n_lines} lines; write one JSON object per line")
    return None


def iter_file_records(path: Path, image_root: Path | None, check_images: bool,
               seen: dict[str, str]) -> Iterable[tuple[LaneRecord | None, list[Problem]]]:
    src = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        yield None, [Problem(src, 0, "label file not found")]
        return
    except (OSError, UnicodeDecodeError) as exc:
        yield None, [Problem(src, 1, f"label file unreadable: {exc}")]
        return
    fp = _file_level_problem(path, text)
    if fp is not None:
        yield None, [fp]
        return
    for lineno, raw_line in enumerate(text.splitlines(), start=1):
        if not raw_line.strip():
            continue
        try:
            obj = json.loads(raw_line)
        except ValueError as exc:
            yield None, [Problem(src, lineno, f"malformed JSON: {exc}")]
            continue
        size, img_err = None, None
        raw = obj.get("raw_file") if isinstance(obj, dict) else None
        if check_images and isinstance(raw, str) and raw and not os.path.isabs(raw) \
                and ".." not in Path(raw).parts:
            assert image_root is not None
            size, img_err = check_image(image_root / raw)
        msgs = _validate_obj(obj, size)
        if img_err:
            msgs.append(img_err)
        if not msgs:
            raw = obj["raw_file"]
            if raw in seen:
                msgs.append(f"duplicate raw_file '{raw}' (first at {seen[raw]})")
            else:
                seen[raw] = f"{src}:{lineno}"
        if msgs:
            yield None, [Problem(src, lineno, m) for m in msgs]
            continue
        yield LaneRecord(raw_file=obj["raw_file"], lanes=[list(l) for l in obj["lanes"]],
                         h_samples=list(obj["h_samples"]), source=src, line=lineno), []


def read_label_file(
    path: str | os.PathLike,
    image_root: str | os.PathLike | None = None,
    *,
    skip_invalid: bool = False,
    check_images: bool = False,
    problems: list[Problem] | None = None,
    _seen: dict[str, str] | None = None,
) -> list[LaneRecord]:
    """Parse and validate one label file.

    By default the first problem raises :class:`LabelError` (``FILE:LINE: message``); with
    ``skip_invalid`` bad frames are dropped, a warning says how many, and the findings are
    appended to ``problems`` if given. ``check_images`` decodes every image under
    ``image_root`` (default: the label file's folder) and bounds-checks coordinates against
    its real size; without it only ``x >= 0`` can be checked.
    """
    path = Path(path)
    root = Path(image_root) if image_root is not None else path.parent
    seen = {} if _seen is None else _seen
    records: list[LaneRecord] = []
    found: list[Problem] = []
    for rec, probs in iter_file_records(path, root, check_images, seen):
        if probs:
            if not skip_invalid:
                raise LabelError(probs[0])
            found.extend(probs)
        elif rec is not None:
            records.append(rec)
    if found:
        bad_lines = len({p.line for p in found})
        warnings.warn(f"{path}: skipped {bad_lines} invalid label line(s); first: {found[0]}",
                      stacklevel=2)
        if problems is not None:
            problems.extend(found)
    return records
