"""Where lanenb keeps its state: ``$LANENB_HOME`` (the job registry, run dirs, snapshots,
scaling reports) and the owner-only folders in it. The bottom of the notebook side: every
layer may use it, it uses nothing of lanenb."""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["lanenb_home", "make_private_dir", "default_run_dir"]


def lanenb_home() -> Path:
    """``$LANENB_HOME`` or ``~/.lanenb``; read on every call so tests can point it elsewhere."""
    return Path(os.environ.get("LANENB_HOME") or Path.home() / ".lanenb").expanduser()


def make_private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and any missing parents with mode 0700 (owner only): run dirs and the
    registry hold logs, checkpoints and job specs that other users of a shared machine have
    no business reading. Existing directories keep the mode their owner gave them."""
    path = Path(path)
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue  # another process made it meanwhile
        os.chmod(folder, 0o700)  # mkdir's mode is filtered by the umask; 0700 is what we want
    if not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(path))
    return path


def default_run_dir(name: str) -> Path:
    """Where a job named ``name`` writes when its spec names no run dir."""
    return lanenb_home() / "runs" / name
