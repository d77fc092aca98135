"""What this machine offers a launch form: datasets on local disk and NVIDIA GPUs.

Apart from the backend's job protocol (``backend.py``) because it answers a different
question (what could run here) and is read by the launch panel before any job exists.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["DATA_ROOTS_ENV", "data_roots", "find_datasets", "local_gpu_count"]

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
    """Directories up to ``depth`` levels below ``roots`` that hold TuSimple label files
    (``label_data*.json`` or ``test_label.json``), as absolute paths, sorted."""
    found: set[str] = set()

    def walk(folder: Path, level: int) -> None:
        if len(found) >= limit:
            return
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        names = {e.name for e in entries}
        if "test_label.json" in names or any(n.startswith("label_data") and n.endswith(".json") for n in names):
            found.add(str(folder.resolve()))
        if level >= depth:
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False) and not e.name.startswith(".") and e.name not in (
                    "clips", "node_modules", "__pycache__", "runs"):
                walk(Path(e.path), level + 1)

    for root in roots if roots is not None else data_roots():
        if Path(root).is_dir():
            walk(Path(root), 0)
    return sorted(found)


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
