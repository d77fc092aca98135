"""Safe extraction of zip and tar archives into a directory.

Every member is checked *before* anything is written, and the whole archive is refused
(:class:`UnsafeArchiveError` naming the member) when one of them

* has an absolute name (``/etc/x``, ``C:\\x``) or a ``..`` component (zip-slip),
* is a symlink or hard link whose target lies outside the destination,
* is a device file, FIFO or socket.

Tar members are then extracted with Python's ``filter="data"`` as a second line (it also
drops set-uid bits and refuses what the checks above refuse); zip members are written by
hand (``zipfile.extract`` would write a symlink as a file holding its target) under a check
that the real path of each parent stays inside the destination. A truncated or damaged
archive raises :class:`CorruptArchiveError`, a full disk :class:`DiskFullError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from .errors import CorruptArchiveError, DiskFullError, UnsafeArchiveError
from .progress import Progress

__all__ = ["extract", "check_member_name", "check_link_target"]

_DRIVE = re.compile(r"^[A-Za-z]:")
_BUF = 1 << 20


def check_member_name(archive: str, name: str) -> str:
    """The member's relative POSIX path, or :class:`UnsafeArchiveError` naming it."""
    norm = name.replace("\\", "/")
    if not norm.strip("/"):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an empty name")
    if norm.startswith("/") or _DRIVE.match(norm):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path; refusing the archive")
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"{archive}: member {name!r} climbs out of the destination ('..'); "
                                 "refusing the archive")
    return "/".join(parts)


def check_link_target(archive: str, name: str, target: str, *, relative_to_member: bool) -> None:
    """Refuse a link whose target (relative to the member's folder, or to the archive root for
    tar hard links) leaves the destination."""
    t = target.replace("\\", "/")
    if t.startswith("/") or _DRIVE.match(t):
        raise UnsafeArchiveError(f"{archive}: link {name!r} points to the absolute path {target!r}; "
                                 "refusing the archive")
    base = posixpath.dirname(name) if relative_to_member else ""
    resolved = posixpath.normpath(posixpath.join(base, t))
    if resolved == ".." or resolved.startswith("../"):
        raise UnsafeArchiveError(f"{archive}: link {name!r} -> {target!r} points outside the "
                                 "destination; refusing the archive")


def _inside(dest_real: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == dest_real or real.startswith(dest_real + os.sep)


def _full(dest: Path, exc: OSError) -> DiskFullError:
    free = shutil.disk_usage(dest).free
    return DiskFullError(errno.ENOSPC, f"no space left while extracting into {dest} "
                         f"({free / 2**20:.1f} MiB free): free space or fetch --to a larger disk; "
                         "the downloaded archives are kept")


def _extract_zip(path: Path, dest: Path, bar_factory: Callable[..., Progress]) -> None:
    name = path.name
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, EOFError) and exc.errno is not None:
            raise
        raise CorruptArchiveError(f"{name} is not a readable zip archive ({exc}): truncated or damaged") from exc
    with zf:
        plan: list[tuple[zipfile.ZipInfo, str, str, str | None]] = []  # (member, path, kind, link target)
        for info in zf.infolist():
            rel = check_member_name(name, info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                target = zf.read(info).decode("utf-8", "replace")
                check_link_target(name, rel, target, relative_to_member=True)
                plan.append((info, rel, "link", target))
            elif mode and (stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
                raise UnsafeArchiveError(f"{name}: member {info.filename!r} is a device file, FIFO or socket; "
                                         "refusing the archive")
            else:
                plan.append((info, rel, "dir" if info.is_dir() else "file", None))
        dest_real = os.path.realpath(dest)
        bar = bar_factory("extract", name, sum(i.file_size for i, *_ in plan))
        try:
            for info, rel, kind, link in plan:
                out = dest / rel
                if not _inside(dest_real, str(out.parent if kind != "dir" else out)):
                    raise UnsafeArchiveError(f"{name}: member {info.filename!r} would be written through a "
                                             "link outside the destination; refusing the archive")
                if kind == "dir":
                    out.mkdir(parents=True, exist_ok=True)
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                if out.is_symlink() or out.exists():
                    out.unlink()
                if link is not None:  # kind "link": the only members planned with a target
                    os.symlink(link, out)
                    continue
                with zf.open(info) as src, open(out, "wb") as dst:
                    while chunk := src.read(_BUF):
                        dst.write(chunk)
                        bar.update(len(chunk))
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise CorruptArchiveError(f"{name} is damaged at member {info.filename!r} ({exc})") from exc
        finally:
            bar.close()


def _extract_tar(path: Path, dest: Path, bar_factory: Callable[..., Progress]) -> None:
    name = path.name
    with contextlib.ExitStack() as stack:  # closes the archive also when reading its index fails
        try:
            tf = stack.enter_context(tarfile.open(path, "r:*"))
            members = tf.getmembers()  # reads to the end: a truncated archive fails here, not half-way
        except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise
            raise CorruptArchiveError(f"{name} is not a readable tar archive ({exc}): truncated or damaged") from exc
        for m in members:
            rel = check_member_name(name, m.name)
            if m.issym():
                check_link_target(name, rel, m.linkname, relative_to_member=True)
            elif m.islnk():
                check_link_target(name, rel, m.linkname, relative_to_member=False)
            elif m.isdev() or m.isfifo() or not (m.isfile() or m.isdir()):
                raise UnsafeArchiveError(f"{name}: member {m.name!r} is a device file, FIFO or special "
                                         "member; refusing the archive")
        bar = bar_factory("extract", name, sum(m.size for m in members if m.isfile()))
        try:
            for m in members:
                tf.extract(m, dest, filter="data")
                if m.isfile():
                    bar.update(m.size)
        except tarfile.FilterError as exc:
            raise UnsafeArchiveError(f"{name}: {exc}; refusing the archive") from exc
        except (tarfile.ReadError, EOFError, zlib.error) as exc:
            raise CorruptArchiveError(f"{name} is damaged ({exc})") from exc
        finally:
            bar.close()


def _copy_file(path: Path, dest: Path, filename: str, bar_factory: Callable[..., Progress]) -> None:
    bar = bar_factory("extract", filename, path.stat().st_size)
    try:
        with open(path, "rb") as src, open(dest / filename, "wb") as dst:
            while chunk := src.read(_BUF):
                dst.write(chunk)
                bar.update(len(chunk))
    finally:
        bar.close()


def extract(path: str | os.PathLike, kind: str, dest: str | os.PathLike, *,
            bar_factory: Callable[..., Progress], filename: str | None = None) -> None:
    """Extract ``path`` (``zip``, ``tar`` or ``file`` = copy as ``filename``) into ``dest``.

    Raises:
        UnsafeArchiveError: a member would escape ``dest`` (nothing extracted).
        CorruptArchiveError: the archive is truncated or damaged.
        DiskFullError: no space left in ``dest``.
    """
    path, dest = Path(path), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if kind not in ("zip", "tar", "file"):  # pragma: no cover - sources are ours
        raise ValueError(f"unknown archive kind {kind!r}")
    try:  # one place turns "no space" (ENOSPC, or EDQUOT on a quota) into the user's error
        if kind == "zip":
            _extract_zip(path, dest, bar_factory)
        elif kind == "tar":
            _extract_tar(path, dest, bar_factory)
        else:
            _copy_file(path, dest, filename or path.name, bar_factory)
    except DiskFullError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _full(dest, exc) from exc
        raise
