"""CULane: its layout, its ``.lines.txt`` labels, and ``CULaneDataset`` (same items as TuSimple).

Layout (as the official archives unpack)::

    driver_23_30frame/05151649_0422.MP4/00000.jpg          frames, 1640x590
    driver_23_30frame/05151649_0422.MP4/00000.lines.txt    one lane per line: "x y x y ..."
    list/train_gt.txt   "/driver_.../00000.jpg /laneseg_label_w16/.../00000.png 1 1 1 0"
    list/val_gt.txt     (same), list/val.txt and list/test.txt: "/driver_.../00000.jpg"
    list/test_split/test0_normal.txt ... test8_night.txt    (evaluation categories)

The four flags of ``*_gt.txt`` say which of the 4 SCNN slots (left to right) hold a lane.
When their count equals the number of lanes in the ``.lines.txt``, the lanes, ordered left to
right by where they meet the bottom row, fill the flagged slots; otherwise (and for test
lists, which have no flags) the TuSimple slot rule of :mod:`.masks` decides.

Lanes become TuSimple-style records (``x`` per row of ``h_samples``, ``-2`` = no point; rows
are the lane points' rounded ``y``, CULane labels one point every 10 rows) so masks,
augmentation and the loader are the TuSimple ones.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .labels import NO_POINT, LabelError, LaneRecord, Problem, check_image
from .masks import NUM_SLOTS, bottom_crossing
from .tusimple import TuSimpleDataset

__all__ = ["CULaneDataset", "CULANE_SIZE", "LIST_FILES", "read_lines_file", "parse_lines", "read_list",
           "lines_path", "to_record", "check_culane", "is_culane_root"]

CULANE_SIZE = (590, 1640)  # (h, w) of every CULane frame
LIST_FILES = {"train": ("list/train_gt.txt",), "val": ("list/val_gt.txt", "list/val.txt"),
              "test": ("list/test.txt",)}


def is_culane_root(root: str | os.PathLike) -> bool:
    """A folder with CULane's ``list/`` files."""
    root = Path(root)
    return any((root / f).is_file() for files in LIST_FILES.values() for f in files)


def lines_path(root: Path, raw_file: str) -> Path:
    """``.../00000.jpg`` -> ``.../00000.lines.txt``."""
    return root / (os.path.splitext(raw_file)[0] + ".lines.txt")


def parse_lines(text: str, source: str = "") -> list[np.ndarray]:
    """Lanes of a ``.lines.txt`` as float ``(N, 2)`` arrays; blank lines are skipped.

    Raises:
        LabelError: ``FILE:LINE`` for a non-number or an odd number of values.
    """
    lanes = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        values = line.split()
        if not values:
            continue
        try:
            nums = [float(v) for v in values]
        except ValueError:
            bad = next(v for v in values if not _is_float(v))
            raise LabelError(Problem(source, lineno, f"not a number: {bad!r} (expected 'x y x y ...')")) from None
        if len(nums) % 2:
            raise LabelError(Problem(source, lineno, f"odd number of values ({len(nums)}): expected x y pairs"))
        lanes.append(np.asarray(nums, dtype=np.float64).reshape(-1, 2))
    return lanes


def _is_float(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def read_lines_file(path: str | os.PathLike) -> list[np.ndarray]:
    """Lanes of one ``.lines.txt``; a missing file raises ``FileNotFoundError``."""
    path = Path(path)
    return parse_lines(path.read_text(encoding="utf-8"), str(path))


def read_list(root: str | os.PathLike, list_file: str) -> list[tuple[str, list[int] | None, int]]:
    """``(raw_file, flags or None, line number)`` per line of a CULane list file.

    Raises:
        LabelError: a line that is not ``/image [/label f1 f2 f3 f4]``.
    """
    path = Path(root) / list_file
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        raw = parts[0].lstrip("/")
        if ".." in Path(raw).parts or not raw:
            raise LabelError(Problem(str(path), lineno, f"image path {parts[0]!r} must stay inside the root"))
        flags = None
        if len(parts) == 2 + NUM_SLOTS:
            if not all(p in ("0", "1") for p in parts[2:]):
                raise LabelError(Problem(str(path), lineno, f"existence flags must be 0 or 1, got {parts[2:]}"))
            flags = [int(p) for p in parts[2:]]
        elif len(parts) != 1:
            raise LabelError(Problem(str(path), lineno, f"expected '/image.jpg' or '/image.jpg /label.png "
                                     f"f1 f2 f3 f4', got {len(parts)} fields"))
        out.append((raw, flags, lineno))
    return out


def to_record(raw_file: str, lanes: Iterable[np.ndarray], source: str = "", line: int = 0) -> LaneRecord:
    """CULane lanes as a TuSimple ``LaneRecord`` (x per row; points left of the frame dropped)."""
    rows: dict[int, None] = {}
    per_lane = []
    for lane in lanes:
        pts: dict[int, int] = {}
        for x, y in lane:
            yi = int(round(y))
            if yi < 0 or yi in pts:
                continue
            pts[yi] = int(round(x)) if x >= 0 else NO_POINT
            rows[yi] = None
        per_lane.append(pts)
    h_samples = sorted(rows)
    return LaneRecord(raw_file=raw_file, lanes=[[p.get(y, NO_POINT) for y in h_samples] for p in per_lane],
                      h_samples=h_samples, source=source, line=line)


def slots_from_flags(record: LaneRecord, flags: list[int] | None, height: int) -> list[int] | None:
    """Lanes left to right into the flagged slots, or ``None`` when the flags do not fit."""
    if flags is None or sum(flags) != len(record.lanes):
        return None
    crossings = [bottom_crossing(lane, record.h_samples, height - 1) for lane in record.lanes]
    known = [c for c in crossings if c is not None]
    if len(known) != len(crossings):
        return None
    order = sorted(range(len(record.lanes)), key=lambda i: known[i])
    flagged = [k for k, f in enumerate(flags) if f]
    slots = [-1] * len(record.lanes)
    for lane_index, slot in zip(order, flagged):
        slots[lane_index] = slot
    return slots


def _list_file(root: Path, split: str) -> str:
    if split not in LIST_FILES:
        raise ValueError(f"split must be one of {', '.join(LIST_FILES)}; got {split!r}")
    for name in LIST_FILES[split]:
        if (root / name).is_file():
            return name
    raise ValueError(f"split {split!r} of {root} has no list file (looked for {', '.join(LIST_FILES[split])})")


def load_culane_split(root: str | os.PathLike, split: str, *, skip_invalid: bool = False,
                      problems: list[Problem] | None = None) -> tuple[list[LaneRecord], list[list[int] | None]]:
    """Records and existence flags of one split (``train``, ``val``, ``test``)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"dataset root not found or not a directory: {root}")
    list_file = _list_file(root, split)
    records, flags_out = [], []
    for raw, flags, lineno in read_list(root, list_file):
        labels = lines_path(root, raw)
        try:
            lanes = read_lines_file(labels)
        except FileNotFoundError:
            problem = Problem(str(root / list_file), lineno, f"label file not found: {labels}")
            if not skip_invalid:
                raise LabelError(problem) from None
            if problems is not None:
                problems.append(problem)
            continue
        except LabelError as exc:
            if not skip_invalid:
                raise
            if problems is not None:
                problems.append(exc.problem)
            continue
        records.append(to_record(raw, lanes, str(root / list_file), lineno))
        flags_out.append(flags)
    if not records:
        raise ValueError(f"split {split!r} of {root} has no frames ({list_file})")
    return records, flags_out


class CULaneDataset(TuSimpleDataset):
    """One split of a CULane root; items as :class:`TuSimpleDataset` (image, mask, exist, index).

    ``val_fraction`` is unused (CULane has its own ``list/val*.txt``); other arguments as
    ``TuSimpleDataset``.
    """

    def __init__(self, root: str | os.PathLike, split: str = "train", **kwargs) -> None:
        self._flags: list[list[int] | None] = []
        super().__init__(root, split, **kwargs)
        for i, (rec, flags) in enumerate(zip(self.records, self._flags)):
            self._slots[i] = slots_from_flags(rec, flags, CULANE_SIZE[0])

    def _load_records(self, val_fraction: float, skip_invalid: bool) -> list[LaneRecord]:
        records, self._flags = load_culane_split(self.root, self.split, skip_invalid=skip_invalid,
                                                 problems=self.problems)
        return records

    def __repr__(self) -> str:
        return super().__repr__().replace("TuSimpleDataset", "CULaneDataset", 1)


def check_culane(root: str | os.PathLike, *, progress: bool = False) -> list[Problem]:
    """Every problem of a CULane root (list files, images, ``.lines.txt``), like ``data check``."""
    root = Path(root)
    if not root.is_dir():
        return [Problem(str(root), 0, "dataset root not found or not a directory")]
    lists = [f for files in LIST_FILES.values() for f in files if (root / f).is_file()]
    if not lists:
        return [Problem(str(root), 0, "no CULane list files (expected list/train_gt.txt, list/test.txt ...)")]
    problems: list[Problem] = []
    seen: set[str] = set()
    bar = None
    if progress:
        from lanenb_trainer.progress import progress_bar

        bar = progress_bar(desc="checking frames", unit="frame")
    for list_file in lists:
        try:
            entries = read_list(root, list_file)
        except LabelError as exc:
            problems.append(exc.problem)
            continue
        for raw, _flags, lineno in entries:
            if raw in seen:
                continue
            seen.add(raw)
            where = str(root / list_file)
            _, err = check_image(root / raw)
            if err:
                problems.append(Problem(where, lineno, err))
            labels = lines_path(root, raw)
            if not labels.is_file():
                problems.append(Problem(where, lineno, f"label file not found: {labels}"))
            else:
                try:
                    read_lines_file(labels)
                except LabelError as exc:
                    problems.append(exc.problem)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return problems
