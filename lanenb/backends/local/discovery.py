"""What this machine offers a launch form: datasets on local disk and NVIDIA GPUs.

Apart from the backend's job protocol (``backend.py``) because it answers a different
question (what could run here) and is read by the launch panel before any job exists.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DATA_ROOTS_ENV", "DatasetSummary", "data_roots", "find_datasets", "local_gpu_count",
           "summarize_dataset"]

DATA_ROOTS_ENV = "LANENB_DATA_ROOTS"


def data_roots() -> list[Path]:
    """Where the launch panel looks for datasets: ``$LANENB_DATA_ROOTS`` (``os.pathsep``
    separated), else the current folder, ``./data`` and ``$LANENB_HOME/data``."""
    from lanenb.home import lanenb_home

    env = os.environ.get(DATA_ROOTS_ENV)
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()]
    return [Path.cwd(), Path.cwd() / "data", lanenb_home() / "data"]


def find_datasets(roots: Sequence[str | os.PathLike[str]] | None = None, depth: int = 3,
                  limit: int = 200) -> list[str]:
    """Directories up to ``depth`` levels below ``roots`` that hold TuSimple label files, as
    absolute paths, sorted: the trainer's own rule (``lanenb_trainer.dataset_dirs``), so what the
    panel offers is what a launch accepts."""
    from lanenb_trainer.dataset_dirs import datasets_below

    found: set[str] = set()
    for root in roots if roots is not None else data_roots():
        if len(found) >= limit:
            break
        found.update(str(p.resolve()) for p in datasets_below(root, depth, limit - len(found)))
    return sorted(found)


@dataclass(frozen=True)
class DatasetSummary:
    """What a launch form says of a dataset so a user can tell two apart before launching:
    its layout and how many frames each split would have."""

    layout: str
    train: int
    val: int
    test: int

    def __str__(self) -> str:
        return f"{self.layout}, {self.train} train / {self.val} val / {self.test} test"


def _frames(path: Path) -> int:
    """Non-blank lines of a JSON-lines label file: one frame each (the parser skips blank lines)."""
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0


def summarize_dataset(root: str | os.PathLike[str], val_fraction: float | None = None) -> DatasetSummary | None:
    """The layout and frames per split of a TuSimple root, split by the trainer's rules
    (``lanenb_trainer.data.splits``) but counted from the label files' lines, never parsed:
    cheap enough for a form that lists every dataset under the data roots.

    Args:
        root: a local folder.
        val_fraction: the share of training frames held out for validation when there is no
            ``val_label.json`` (None: the trainer's default, ``TrainConfig.val_fraction``).

    Returns:
        The summary, or None when ``root`` is no local TuSimple root (a PVC name, a data
        reference, a missing folder).
    """
    from lanenb_trainer.config import TrainConfig
    from lanenb_trainer.data.splits import find_label_files, holdout_count

    if not Path(root).is_dir():
        return None
    files = find_label_files(root)
    if not any(files.values()):
        return None
    count = {split: sum(_frames(p) for p in paths) for split, paths in files.items()}
    if not files["val"]:  # validation is held out of training, as many frames as splits._holdout takes
        fraction = TrainConfig.val_fraction if val_fraction is None else val_fraction
        held = holdout_count(count["train"], fraction)
        count.update(train=count["train"] - held, val=held)
    return DatasetSummary("tusimple", count["train"], count["val"], count["test"])


def local_gpu_count() -> int:
    """NVIDIA GPUs on this machine (NVML); 0 without a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library: a CPU machine
        return 0
