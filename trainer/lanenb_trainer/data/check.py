"""``check_dataset(root)``: every problem of a TuSimple root at once (labels and frames), for
``lanenb data check``, the fetcher and ``DatasetPreview``. Above both ``labels`` (how a line is
read and validated) and ``splits`` (which files a root has)."""

from __future__ import annotations

import os
from pathlib import Path

from .labels import Problem, iter_file_records
from .splits import find_label_files

__all__ = ["check_dataset"]


def check_dataset(root: str | os.PathLike, *, progress: bool = False) -> list[Problem]:
    """Every problem of a dataset root (labels and images), in file/line order. Read-only."""
    root = Path(root)
    if not root.is_dir():
        return [Problem(str(root), 0, "dataset root not found or not a directory")]
    files = find_label_files(root)
    all_files = [p for split in ("train", "val", "test") for p in files[split]]
    if not all_files:
        return [Problem(str(root), 0, "no label files found (expected label_data*.json, "
                        "test_label.json or val_label.json)")]
    seen: dict[str, str] = {}
    problems: list[Problem] = []
    bar = None
    if progress:
        from lanenb_trainer.progress import progress_bar

        bar = progress_bar(desc="checking frames", unit="frame")
    for path in all_files:
        for _, probs in iter_file_records(path, root, True, seen):
            problems.extend(probs)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return problems

