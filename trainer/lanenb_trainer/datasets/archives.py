"""Safe extraction of zip and tar archives into a directory.

Every member is checked *before* anything is written, and the whole archive is refused
(:class:`UnsafeArchiveError` naming the member) when one of them

* has an absolute name (``/etc/x``, ``C:\\x``) or a ``..`` component (zip-slip),
* is a symlink or hard link whose target lies outside the destination, resolved through the
  archive's other links as the file system will (``d/l -> ..`` then ``d/l/d/l/x -> ../../../..``
  is text that stays inside and a link that points at ``/``),
* would be written through one of the archive's own links (``d/l/...`` after a link ``d/l``),
* is a device file, FIFO or socket.

Links are created last, after every file and folder, and each one's real path is checked again
on disk (an existing link in the destination counts too); one that leaves the destination
removes the links just made and refuses the archive.

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

__all__ = ["extract", "check_member_name", "check_link_target", "check_links"]

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


_MAX_HOPS = 40  # as the kernel's ELOOP limit: a loop of links is refused, never followed forever


def _resolve(archive: str, member: str, path: str, links: dict[str, str]) -> str | None:
    """``path`` (relative to the destination) with the archive's ``links`` followed as the file
    system will follow them once extracted: the relative path it lands on, or None when it
    leaves the destination. Text checks alone miss chains whose ``..`` climbs out of a link."""
    parts: list[str] = []
    todo = [c for c in path.split("/") if c not in ("", ".")]
    hops = 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        here = "/".join([*parts, part])
        target = links.get(here)
        if target is None:
            parts.append(part)
            continue
        hops += 1
        if hops > _MAX_HOPS:
            raise UnsafeArchiveError(f"{archive}: link {member!r} goes through a loop of links; refusing the archive")
        if target.startswith("/") or _DRIVE.match(target):
            return None
        todo = [c for c in target.split("/") if c not in ("", ".")] + todo  # relative to the link's folder
    return "/".join(parts)


def check_links(archive: str, members: list[tuple[str, str, str | None]]) -> None:
    """Refuse the archive before anything is written when a member goes through one of its
    links or a link ends up outside the destination once every link exists.

    Args:
        archive: the archive's name, for the message.
        members: ``(relative path, kind, link target)`` in archive order; kind is ``dir``,
            ``file``, ``symlink`` (target relative to the member's folder) or ``hardlink``
            (target relative to the destination).
    """
    links = {rel: (target or "").replace("\\", "/") for rel, kind, target in members if kind == "symlink"}
    for rel, kind, _ in members:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            through = "/".join(parts[:i])
            if through in links:
                raise UnsafeArchiveError(f"{archive}: member {rel!r} would be written through the archive's link "
                                         f"{through!r}; refusing the archive")
        if kind not in ("symlink", "hardlink") and rel in links:
            raise UnsafeArchiveError(f"{archive}: member {rel!r} is both a link and a {kind}; refusing the archive")
    for rel, kind, target in members:
        if kind == "symlink":
            base = posixpath.dirname(rel)
            where = _resolve(archive, rel, posixpath.join(base, links[rel]) if base else links[rel], links)
        elif kind == "hardlink":
            where = _resolve(archive, rel, (target or "").replace("\\", "/"), links)
        else:
            continue
        if where is None:
            raise UnsafeArchiveError(f"{archive}: link {rel!r} -> {target!r} leads outside the destination "
                                     "through the archive's other links; refusing the archive")


def _check_real_links(archive: str, dest: Path, made: list[str]) -> None:
    """The second line, on disk: every link just made resolves inside ``dest`` (links already
    in ``dest`` before this archive count). A link that does not is removed with the others
    this archive made, and the archive refused."""
    dest_real = os.path.realpath(dest)
    bad = next((rel for rel in made if not _inside(dest_real, str(dest / rel))), None)
    if bad is None:
        return
    for rel in made:
        with contextlib.suppress(OSError):
            os.unlink(dest / rel)
    raise UnsafeArchiveError(f"{archive}: link {bad!r} resolves outside the destination on disk; its links were "
                             "removed; refusing the archive")


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
        check_links(name, [(rel, "symlink" if kind == "link" else kind, link) for _, rel, kind, link in plan])
        plan.sort(key=lambda item: item[2] == "link")  # links last: nothing is ever written through one
        dest_real = os.path.realpath(dest)
        made: list[str] = []
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
                    made.append(rel)
                    continue
                with zf.open(info) as src, open(out, "wb") as dst:
                    while chunk := src.read(_BUF):
                        dst.write(chunk)
                        bar.update(len(chunk))
            _check_real_links(name, dest, made)
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
        planned: list[tuple[str, str, str | None]] = []
        files: set[str] = set()  # the regular files so far: what a hard link may name
        for m in members:
            rel = check_member_name(name, m.name)
            kind = "symlink" if m.issym() else "hardlink" if m.islnk() else "dir" if m.isdir() else "file"
            planned.append((rel, kind, m.linkname if kind.endswith("link") else None))
            if m.issym():
                check_link_target(name, rel, m.linkname, relative_to_member=True)
            elif m.islnk():
                check_link_target(name, rel, m.linkname, relative_to_member=False)
                # a tar hard link names an earlier file member; one through a symlink or to a path
                # the archive lacks would be resolved on disk (or fail in tarfile with a bare KeyError)
                if check_member_name(name, m.linkname) not in files:
                    raise UnsafeArchiveError(
                        f"{name}: member {m.name!r} is a hard link to {m.linkname!r}, which is not a file "
                        "stored before it in the archive; refusing the archive")
            elif m.isfile():
                files.add(rel)
            elif m.isdev() or m.isfifo() or not (m.isfile() or m.isdir()):
                raise UnsafeArchiveError(f"{name}: member {m.name!r} is a device file, FIFO or special "
                                         "member; refusing the archive")
        check_links(name, planned)
        bar = bar_factory("extract", name, sum(m.size for m in members if m.isfile()))
        made: list[str] = []
        try:  # links last (stable sort: archive order otherwise), so nothing is written through one
            for m, (rel, _, _) in sorted(zip(members, planned), key=lambda mp: mp[0].issym() or mp[0].islnk()):
                tf.extract(m, dest, filter="data")
                if m.issym():
                    made.append(rel)
                if m.isfile():
                    bar.update(m.size)
            _check_real_links(name, dest, made)
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
