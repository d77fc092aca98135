"""Where lanenb keeps its state: ``$LANENB_HOME`` (the job registry, run dirs, snapshots,
scaling reports) and the owner-only folders in it. The bottom of the notebook side: every
layer may use it, it uses nothing of lanenb."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["lanenb_home", "make_private_dir", "private_home", "default_run_dir"]


def lanenb_home() -> Path:
    """``$LANENB_HOME`` or ``~/.lanenb``; read on every call so tests can point it elsewhere."""
    return Path(os.environ.get("LANENB_HOME") or Path.home() / ".lanenb").expanduser()


def make_private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and any missing parents with mode 0700 (owner only), and tighten ``path``
    to 0700 if it already exists and belongs to this user: run dirs and the registry hold logs,
    checkpoints and job specs that other users of a shared machine have no business reading.

    Under ``$LANENB_HOME`` the home itself and every folder down to ``path`` are tightened too,
    whoever made them first (an older lanenb, restic, a ``mkdir`` with the default umask).
    Existing folders outside the home (``~``, ``/tmp``, a team's data disk) keep their mode:
    only ``path`` itself is lanenb's to tighten. Folders of another user are left alone.

    Raises:
        NotADirectoryError: ``path`` exists and is not a directory.
    """
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
        raise NotADirectoryError(errno.ENOTDIR, f"{str(path)!r} is not a directory", str(path))
    for folder in _lanenb_folders(path):
        _tighten(folder)
    return path


def _lanenb_folders(path: Path) -> list[Path]:
    """``path``, and when it lies under ``$LANENB_HOME``, every folder from the home down to it."""
    home = lanenb_home().absolute()
    target = path.absolute()
    if target != home and home not in target.parents:
        return [path]
    chain = [target]
    while chain[-1] != home:
        chain.append(chain[-1].parent)
    return chain


def _tighten(folder: Path) -> None:
    """0700 for a folder this user owns that others can read or enter; a link is never followed."""
    try:
        st = os.lstat(folder)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or not st.st_mode & 0o077:
        return
    try:
        os.chmod(folder, stat.S_IMODE(st.st_mode) & 0o700)
    except OSError:  # a read-only mount: nothing to tighten there
        pass


def private_home() -> Path:
    """``$LANENB_HOME``, created (or tightened) 0700: call before writing anything in it."""
    return make_private_dir(lanenb_home())


def default_run_dir(name: str) -> Path:
    """Where a job named ``name`` writes when its spec names no run dir."""
    return lanenb_home() / "runs" / name
