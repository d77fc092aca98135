"""Which label files of a TuSimple root form the train / val / test splits.

Rules (the official layout): every ``label_data*.json`` is training data, ``test_label.json``
is the test set, ``val_label.json`` (if present) is validation. Without ``val_label.json`` the
validation split is a held-out fraction of training chosen by a hash of ``raw_file`` - not by
the training seed - so changing the seed or the number of ranks never leaks validation frames
into training, and the choice is identical on every rank and every machine.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from .labels import LaneRecord, Problem, read_label_file

__all__ = ["SPLITS", "find_label_files", "holdout_count", "load_split"]

SPLITS = ("train", "val", "test")


def find_label_files(root: str | os.PathLike) -> dict[str, list[Path]]:
    root = Path(root)
    train = sorted(p for p in root.glob("label_data*.json") if p.is_file())
    val = [root / "val_label.json"] if (root / "val_label.json").is_file() else []
    test = [root / "test_label.json"] if (root / "test_label.json").is_file() else []
    return {"train": train, "val": val, "test": test}


def holdout_count(frames: int, fraction: float) -> int:
    """How many of ``frames`` training frames are held out for validation (without
    ``val_label.json``): at least one when there are two or more and ``fraction > 0``."""
    if frames <= 1 or fraction <= 0:
        return 0
    return max(1, round(fraction * frames))


def _holdout(records: list[LaneRecord], fraction: float) -> set[str]:
    k = holdout_count(len(records), fraction)
    if not k:
        return set()
    ranked = sorted(records, key=lambda r: (zlib.crc32(r.raw_file.encode()), r.raw_file))
    return {r.raw_file for r in ranked[:k]}


def load_split(
    root: str | os.PathLike,
    split: str,
    *,
    val_fraction: float = 0.1,
    skip_invalid: bool = False,
    problems: list[Problem] | None = None,
) -> list[LaneRecord]:
    """Records of one split; raises ``ValueError`` naming the root when it has no frames."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}; got {split!r}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1); got {val_fraction}")
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"dataset root not found or not a directory: {root}")
    files = find_label_files(root)
    seen: dict[str, str] = {}

    def read(paths: list[Path]) -> list[LaneRecord]:
        out: list[LaneRecord] = []
        for p in paths:
            out.extend(read_label_file(p, root, skip_invalid=skip_invalid,
                                       problems=problems, _seen=seen))
        return out

    if split == "test" or (split == "val" and files["val"]):
        records = read(files[split])
        wanted = {"test": "test_label.json", "val": "val_label.json"}[split]
    else:
        train = read(files["train"])
        held = set() if files["val"] else _holdout(train, val_fraction)
        keep_val = split == "val"
        records = [r for r in train if (r.raw_file in held) == keep_val]
        wanted = "label_data*.json" + (" (val = held-out fraction)" if keep_val else "")
    if not records:
        raise ValueError(f"split {split!r} of {root} has no frames (looked for {wanted}"
                         + (f", val_fraction={val_fraction}" if split == "val" else "") + ")")
    return records

