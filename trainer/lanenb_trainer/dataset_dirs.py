"""Is this folder a dataset, and if not, which folder below it is?

A new user's first mistake is pointing ``--data`` one level too high (``--data data`` where the
frames are in ``data/synth``). The trainer refuses such a folder before any rank starts, and
names the dataset it found below it; the launch panel lists datasets with the same rule, so
what the panel offers is exactly what the trainer accepts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["is_label_file", "holds_labels", "datasets_below", "not_a_dataset"]

_SKIP = frozenset({"clips", "node_modules", "__pycache__", "runs"})  # never a dataset root, often huge


def is_label_file(name: str) -> bool:
    """A TuSimple label file name: ``label_data*.json`` (train) or ``test_label.json`` / ``val_label.json``."""
    return name in ("test_label.json", "val_label.json") or (name.startswith("label_data") and name.endswith(".json"))


def holds_labels(names: Iterable[str], *, train: bool = False) -> bool:
    """Whether a folder with these entry names is a TuSimple root (``train``: one with training labels)."""
    if train:
        return any(n.startswith("label_data") and n.endswith(".json") for n in names)
    return any(is_label_file(n) for n in names)


def datasets_below(root: str | os.PathLike[str], depth: int = 3, limit: int = 200, *,
                   train: bool = False) -> list[Path]:
    """Folders up to ``depth`` levels below ``root`` (itself included) that hold TuSimple label
    files, sorted; hidden folders and ``clips/`` are not entered."""
    found: list[Path] = []

    def walk(folder: Path, level: int) -> None:
        if len(found) >= limit:
            return
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        if holds_labels((e.name for e in entries), train=train):
            found.append(folder)
        if level >= depth:
            return
        for e in sorted(entries, key=lambda e: e.name):
            if e.is_dir(follow_symlinks=False) and not e.name.startswith(".") and e.name not in _SKIP:
                walk(Path(e.path), level + 1)

    if Path(root).is_dir():
        walk(Path(root), 0)
    return sorted(found)


def not_a_dataset(data: str) -> str | None:
    """Why ``data`` cannot be trained on, in one line with the fix, for ``--data DATA: <this>``
    (None: it holds training labels).

    A folder without ``label_data*.json`` would start every rank only to fail on an empty split,
    leaving a failed record and empty charts; the line names a dataset found below it
    ("did you mean 'data/synth'?") or says how to make one.
    """
    root = Path(data).expanduser()
    if not root.is_dir():
        return "no such directory"
    try:
        names = os.listdir(root)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if holds_labels(names, train=True):
        return None
    below = [p for p in datasets_below(root, depth=3, limit=5, train=True) if p != root]
    hint = ("did you mean " + " or ".join(repr(str(Path(data) / p.relative_to(root))) for p in below[:3]) + "?"
            if below else "make one with 'lanenb data synth --out data/synth', or fetch TuSimple with "
                          "'lanenb data fetch tusimple --to DIR'")
    return f"not a TuSimple dataset (no label_data*.json training labels in it); {hint}"
