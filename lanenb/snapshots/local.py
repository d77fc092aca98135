"""The local snapshot store: restic, a content-addressed, deduplicating snapshot engine.

Why restic (docs/architecture/contract-stores.md compares it with borgbackup): one static binary (Debian
``restic``), JSON output for every command we parse, tags for labels, parent-based change
detection (an unchanged 10k-file tree is re-snapshotted from metadata alone), ``diff``,
``restore --target``, ``check`` and ``forget --prune``. Its crash semantics are what we need:
a snapshot object is written only after all its data, so a killed backup leaves no visible
snapshot, and data is never modified in place (a restored file is a new copy; editing it
cannot alter the stored version). Concurrent backups of one volume are safe (restic's
non-exclusive repository locks); ``forget --prune`` takes the exclusive lock and we retry it.

Layout under ``$LANENB_HOME/snapshots/``: ``repo/`` (the restic repository), ``password``
(generated, mode 0600, never printed or logged), ``meta/<id>.json`` (sizes from the backup
summary: a cache, recomputed with ``restic stats`` when missing; with the volume's manifest
digest, ``unchanged_since``'s answer), ``cache/`` (restic's cache).
"""

from __future__ import annotations

import builtins
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lanenb.home import make_private_dir
from lanenb.snapshots.base import (
    FileChange,
    FileEntry,
    Snapshot,
    SnapshotDiff,
    SnapshotError,
    SnapshotInputError,
    SnapshotNotFoundError,
    SnapshotStore,
    TargetExistsError,
    Verification,
    check_labels,
    check_name,
    parse_time,
    snapshot_id,
)
from lanenb_trainer.atomic import write_json
from lanenb_trainer.k8s_snapshot import slug

__all__ = ["ResticStore", "HOST"]

HOST = "lanenb"  # one fixed host name: the parent lookup never depends on the machine's name
NAME_TAG = "lanenb.name"
LOCK_RETRIES = 20
_HEX = re.compile(r"^[0-9a-f]{4,64}$")


def _home() -> Path:
    from lanenb.home import lanenb_home

    return lanenb_home()


def _pattern(path: Path) -> str:
    """``path`` as a restic exclude pattern matching that path only: absolute, so a folder of the
    same name deeper down stays in, with the glob characters escaped (restic matches each part
    with Go's ``filepath.Match``)."""
    return re.sub(r"([][*?\\])", r"\\\1", str(path))


def check_exclude(exclude: Sequence[str]) -> list[str]:
    """``exclude`` as clean relative paths inside a volume (``pids``, ``logs/x.err``)."""
    if isinstance(exclude, (str, bytes)):
        raise SnapshotInputError(f"exclude must be a list of relative paths, got {exclude!r}")
    out = []
    for item in exclude:
        parts = Path(item).parts if isinstance(item, str) else ()
        if not parts or Path(item).is_absolute() or ".." in parts:
            raise SnapshotInputError(f"exclude {item!r}: must be a path relative to the volume, inside it")
        out.append(str(Path(*parts)))
    return sorted(set(out))


def manifest(root: Path, exclude: Sequence[str] = ()) -> str:
    """A digest of what restic's change detection looks at, for every entry under ``root`` but the
    excluded ones: relative path, mode, size, modification and change times (ns), inode, and a
    symlink's target. Equal digests mean nothing was added, removed, written or renamed; the
    change time cannot be set back, so a file rewritten to look as before still differs.

    Raises:
        OSError: an entry could not be read (then nobody can tell: take a new snapshot).
    """
    skip = set(exclude)
    digest = hashlib.sha256()

    def fail(exc: OSError) -> None:
        raise exc

    for folder, dirs, files in os.walk(root, onerror=fail):  # symlinks are not followed
        base = Path(folder).relative_to(root)
        dirs[:] = sorted(d for d in dirs if str(base / d) not in skip)
        for name in sorted(dirs + [f for f in files if str(base / f) not in skip]):
            rel = base / name
            st = os.lstat(root / rel)
            target = os.readlink(root / rel) if os.path.islink(root / rel) else ""
            digest.update(os.fsencode(f"{rel}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0"
                                      f"{st.st_ino}\0{target}\n"))
    return digest.hexdigest()


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``, failing with ``FileExistsError`` if ``dst`` exists, even if it
    appeared a moment ago (``renameat2(RENAME_NOREPLACE)``; plain ``rename`` would replace an
    empty directory)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:  # no renameat2 (old libc): check, then rename (a tiny window remains)
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, "File exists", str(dst))
        os.rename(src, dst)
        return
    at_fdcwd, rename_noreplace_flag = -100, 1
    if fn(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), rename_noreplace_flag) != 0:
        err = ctypes.get_errno()
        error = FileExistsError if err == errno.EEXIST else OSError
        raise error(err, os.strerror(err), str(dst))


class ResticStore(SnapshotStore):
    """Snapshots of directories in a restic repository under ``$LANENB_HOME/snapshots``.

    Args:
        root: the store's directory (default ``$LANENB_HOME/snapshots``).
        restic: the restic executable.
    """

    name = "local"

    def __init__(self, root: str | os.PathLike | None = None, *, restic: str = "restic") -> None:
        self.root = Path(root).expanduser() if root is not None else _home() / "snapshots"
        self.repo = self.root / "repo"
        self.password_file = self.root / "password"
        self.meta_dir = self.root / "meta"
        self.cache_dir = self.root / "cache"
        self.restic = restic

    # ------------------------------------------------------------------ plumbing
    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RESTIC_")}
        env.update(RESTIC_REPOSITORY=str(self.repo), RESTIC_PASSWORD_FILE=str(self.password_file),
                   RESTIC_CACHE_DIR=str(self.cache_dir))
        return env

    def _binary(self) -> str:
        found = shutil.which(self.restic)
        if found is None:
            raise SnapshotError(f"the restic executable {self.restic!r} was not found; install the Debian "
                                "package 'restic' (scripts/setup.sh does)")
        return found

    @contextmanager
    def _flock(self) -> Iterator[None]:
        make_private_dir(self.root)  # holds the repository password: 0700, and so is $LANENB_HOME
        with open(self.root / ".init.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _ensure_repo(self) -> None:
        """Create the password file (0600) and the repository once, safely across processes:
        both are made under a temporary name and renamed into place."""
        if (self.repo / "config").exists():
            return
        with self._flock():
            if (self.repo / "config").exists():
                return
            if not self.password_file.exists():
                tmp = self.root / f".password.{uuid.uuid4().hex}"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(secrets.token_urlsafe(32))
                os.replace(tmp, self.password_file)
            staging = self.root / f".repo.{uuid.uuid4().hex}"
            env = {**self._env(), "RESTIC_REPOSITORY": str(staging)}
            proc = subprocess.run([self._binary(), "init", "--quiet"], env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                raise SnapshotError(f"restic init of {self.repo} failed: {proc.stderr.strip()}")
            os.rename(staging, self.repo)

    def _run(self, args: list[str], *, cwd: str | os.PathLike | None = None) -> str:
        """Run restic; retry while another process holds a conflicting lock (stale locks of
        killed processes are removed with ``restic unlock``, which keeps live ones)."""
        self._ensure_repo()
        argv = [self._binary(), *args]
        for attempt in range(LOCK_RETRIES):
            proc = subprocess.run(argv, env=self._env(), cwd=cwd, capture_output=True, text=True)
            if proc.returncode == 0:
                return proc.stdout
            if "already locked" in proc.stderr or "unable to create lock" in proc.stderr:
                subprocess.run([argv[0], "unlock"], env=self._env(), capture_output=True)
                time.sleep(min(2.0, 0.1 * 2 ** attempt))
                continue
            break
        raise SnapshotError(f"restic {args[0]} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")

    def _json_lines(self, text: str) -> list[dict[str, Any]]:
        out = []
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def _raw(self) -> list[dict[str, Any]]:
        data = json.loads(self._run(["snapshots", "--json"]) or "[]")
        return sorted(data or [], key=lambda s: s["time"])

    def _meta(self, full_id: str) -> dict[str, Any]:
        path = self.meta_dir / f"{full_id}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass
        stats = json.loads(self._run(["stats", "--json", full_id]))
        meta = {"size": stats.get("total_size")}
        make_private_dir(self.meta_dir)
        write_json(path, meta, indent=None)
        return meta

    def _to_snapshot(self, raw: dict[str, Any], *, sizes: bool = True) -> Snapshot:
        labels: dict[str, str] = {}
        name = raw["short_id"]
        for tag in raw.get("tags") or []:
            key, sep, value = tag.partition("=")
            if key == NAME_TAG:
                name = value
            elif sep:
                labels[key] = value
        meta = self._meta(raw["id"]) if sizes else {}
        created = meta.get("created") or parse_time(raw.get("time"))
        return Snapshot(id=raw["short_id"], name=name, volume=(raw.get("paths") or [""])[0],
                        created=created, size=meta.get("size"), labels=labels, ready=True,
                        backend=self.name, file_count=meta.get("files"))

    def _ids_on_disk(self, prefix: str) -> list[str]:
        """Full snapshot ids starting with ``prefix``, read from the repository's ``snapshots/``
        directory (restic's local layout: one file per snapshot, named by its id) without
        starting restic: each restic call pays ~0.5 s of key derivation to open the repository."""
        try:
            return sorted(e.name for e in os.scandir(self.repo / "snapshots") if e.name.startswith(prefix))
        except FileNotFoundError:
            return []

    def _full_id(self, id: str | Snapshot) -> str:
        """The full id of snapshot ``id`` (a ``Snapshot``, a unique id prefix, or a name); no
        restic call for ids."""
        id = snapshot_id(id)
        if _HEX.match(id):
            found = self._ids_on_disk(id)
            if len(found) > 1:
                raise SnapshotInputError(f"snapshot id {id!r} is ambiguous: it matches "
                                         f"{', '.join(f[:8] for f in found)}; give more characters")
            if found:
                return found[0]
        return self._find(id)["id"]  # a name (or an unknown id): look it up in the listing

    def _find(self, id: str | Snapshot) -> dict[str, Any]:
        id = snapshot_id(id)
        raws = self._raw()
        by_id = [r for r in raws if _HEX.match(id) and r["id"].startswith(id)]
        by_name = [r for r in raws if f"{NAME_TAG}={id}" in (r.get("tags") or [])]
        found = by_id or by_name
        if len(found) > 1:
            raise SnapshotInputError(f"snapshot id {id!r} is ambiguous: it matches "
                                     f"{', '.join(r['short_id'] for r in found)}; give more characters")
        if not found:
            recent = ", ".join(r["short_id"] for r in raws[-5:]) or "none yet"
            raise SnapshotNotFoundError(f"no local snapshot {id!r} in {self.repo} (recent: {recent})")
        return found[0]

    @staticmethod
    def _volume(volume: str | os.PathLike) -> Path:
        if not isinstance(volume, (str, os.PathLike)) or not str(volume).strip():
            raise SnapshotInputError(f"volume must be a directory path, got {volume!r}")
        path = Path(volume).expanduser().resolve()
        if not path.is_dir():
            raise SnapshotInputError(f"volume {str(volume)!r} is not an existing directory")
        return path

    # ------------------------------------------------------------------ API
    def create(self, volume: str | os.PathLike, labels: Mapping[str, Any] | None = None, *,
               name: str | None = None, progress: bool = False, exclude: Sequence[str] = ()) -> Snapshot:
        # The docstring is SnapshotStore.create's (what Shift-Tab shows); ``exclude`` (this store
        # only): paths relative to the volume left out, files or whole folders. How: one restic call
        # (``backup``) for a generated name; a given name costs one more (the listing that proves
        # it unique). restic picks the parent itself (the newest snapshot of the same host and
        # absolute path: we pin the host), so unchanged files are not re-read; the new id comes
        # from the backup summary and its full form from the repository's ``snapshots/`` directory.
        path = self._volume(volume)
        tags = check_labels(labels)
        if name is not None:
            name = check_name(name)
            if any(f"{NAME_TAG}={name}" in (r.get("tags") or []) for r in self._raw()):
                raise SnapshotInputError(f"a snapshot named {name!r} already exists; pick another name")
        else:  # time + 24 random bits: unique without a listing
            name = f"{slug(path.name)}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        exclude = check_exclude(exclude)
        tag_list = [f"{NAME_TAG}={name}"] + [f"{k}={v}" for k, v in tags.items()]
        argv = [self._binary(), "backup", "--json", "--host", HOST, "--tag", ",".join(tag_list)]
        argv += [arg for rel in exclude for arg in ("--exclude", _pattern(path / rel))] + ["."]
        started = time.time()
        try:  # before the backup: a file written while restic reads it then differs next time
            seen: str | None = manifest(path, exclude)
        except OSError:
            seen = None
        summary = self._backup(argv, path, progress)
        short = summary["snapshot_id"]
        found = self._ids_on_disk(short)
        full = found[0] if len(found) == 1 else self._find(short)["id"]
        make_private_dir(self.meta_dir)
        write_json(self.meta_dir / f"{full}.json", {
            "size": summary.get("total_bytes_processed"), "files": summary.get("total_files_processed"),
            "data_added": summary.get("data_added"), "created": started, "volume": str(path),
            "exclude": exclude, "manifest": seen}, indent=None)
        return self._to_snapshot({"id": full, "short_id": full[:8], "paths": [str(path)], "tags": tag_list})

    def _backup(self, argv: list[str], cwd: Path, progress: bool) -> dict[str, Any]:
        """Run ``restic backup`` streaming its JSON status into a progress bar (plain lines when
        stderr is not a terminal); the snapshot exists only if restic reaches its summary. Any
        exception (Ctrl-C included) kills restic."""
        from lanenb_trainer.progress import progress_bar

        self._ensure_repo()
        summary: dict[str, Any] | None = None
        errors: list[str] = []
        bar = progress_bar(total=0, unit="B", unit_scale=True, desc=f"snapshot {cwd.name}", disable=not progress,
                           leave=False, file=sys.stderr)
        with subprocess.Popen(argv, cwd=cwd, env=self._env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) as proc:
            try:
                assert proc.stdout is not None and proc.stderr is not None
                for line in proc.stdout:
                    if not line.startswith("{"):
                        continue
                    msg = json.loads(line)
                    if msg.get("message_type") == "status":
                        bar.total = msg.get("total_bytes") or bar.total
                        bar.n = msg.get("bytes_done", 0)
                        bar.refresh()
                    elif msg.get("message_type") == "summary":
                        summary = msg
                    elif msg.get("message_type") == "error":
                        errors.append(str(msg.get("error", msg)))
                stderr = proc.stderr.read()
                rc = proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                bar.close()
        if rc == 3 and summary is not None:  # "some source files could not be read"
            raise SnapshotError(f"restic could not read some files of {cwd}: {'; '.join(errors) or stderr.strip()}")
        if rc != 0 or summary is None:
            raise SnapshotError(f"restic backup of {cwd} failed (exit {rc}): {stderr.strip()[-2000:]}")
        return summary

    def list(self, volume: str | os.PathLike | None = None, labels: Mapping[str, Any] | None = None
             ) -> list[Snapshot]:
        want = check_labels(labels)
        path = str(self._volume(volume)) if volume is not None else None
        out = []
        for raw in self._raw():
            if path is not None and raw.get("paths") != [path]:
                continue
            tags = set(raw.get("tags") or [])
            if all(f"{k}={v}" in tags for k, v in want.items()):
                out.append(self._to_snapshot(raw))
        return sorted(out, key=lambda snap: snap.created)  # lanenb's start times where known

    def get(self, id: str | Snapshot) -> Snapshot:
        return self._to_snapshot(self._find(id))

    def files(self, id: str | Snapshot) -> builtins.list[FileEntry]:  # list: the method above
        full = self._full_id(id)
        return [FileEntry(path=n["path"], type=n.get("type", "file"), size=n.get("size"))
                for n in self._json_lines(self._run(["ls", "--json", full]))
                if n.get("struct_type") == "node"]

    def diff(self, a: str | Snapshot, b: str | Snapshot) -> SnapshotDiff:
        fa, fb = self._full_id(a), self._full_id(b)
        sizes = [{f.path: f.size for f in self.files(full) if f.type == "file"} for full in (fa, fb)]
        changes = []
        kinds = {"+": "added", "-": "removed", "M": "changed", "T": "changed"}
        for msg in self._json_lines(self._run(["diff", "--json", fa, fb])):
            if msg.get("message_type") != "change" or msg["path"].endswith("/"):
                continue  # directories: their files are listed one by one
            kind = kinds.get(msg.get("modifier", "")[:1])
            if kind is None:
                continue  # "U": metadata only, same content
            changes.append(FileChange(path=msg["path"], change=kind, size_before=sizes[0].get(msg["path"]),
                                      size_after=sizes[1].get(msg["path"])))
        return SnapshotDiff(a=fa[:8], b=fb[:8], changes=changes)

    def unchanged_since(self, volume: str | os.PathLike, id: str | Snapshot) -> bool:
        # The docstring is SnapshotStore.unchanged_since's. How: the manifest digest taken when
        # this store made the snapshot (meta/<id>.json) against one taken now; no restic call for
        # an id. Not restic's own ``backup --dry-run`` counters: they miss an entry removed from
        # the top folder (only the root tree differs, and no counter covers the root).
        path = self._volume(volume)
        full = self._full_id(id)
        try:
            meta = json.loads((self.meta_dir / f"{full}.json").read_text())
        except (OSError, ValueError):
            return False  # made elsewhere, or the cache was cleared: nobody can tell
        if not meta.get("manifest") or meta.get("volume") != str(path):
            return False
        try:
            return manifest(path, meta.get("exclude") or ()) == meta["manifest"]
        except OSError:
            return False

    def restore(self, id: str | Snapshot, new_volume: str | os.PathLike, *, progress: bool = False) -> str:
        if not isinstance(new_volume, (str, os.PathLike)) or not str(new_volume).strip():
            raise SnapshotInputError(f"restore target must be a new directory path, got {new_volume!r}")
        target = Path(new_volume).expanduser().absolute()
        if os.path.lexists(target):
            raise TargetExistsError(f"restore target {str(new_volume)!r} already exists; restore never overwrites "
                                    "data: give a new directory name")
        full = self._full_id(id)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.parent / f".{target.name}.restoring-{uuid.uuid4().hex[:8]}"
        try:
            if progress:
                print(f"restoring {full[:8]} into {target} ...", file=sys.stderr)
            self._run(["restore", full, "--target", str(staging)])
            staging.mkdir(exist_ok=True)  # an empty snapshot restores to nothing
            try:
                rename_noreplace(staging, target)
            except FileExistsError:
                raise TargetExistsError(f"restore target {str(new_volume)!r} appeared while restoring; it was "
                                        "left untouched: give a new directory name") from None
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return str(target)

    def delete(self, id: str | Snapshot) -> None:
        full = self._full_id(id)
        self._run(["forget", "--prune", full])
        (self.meta_dir / f"{full}.json").unlink(missing_ok=True)

    def verify(self, id: str | Snapshot, *, read_data: bool = False) -> Verification:
        """Check the snapshot can be restored: one ``restic check`` of the index, packs, and
        every snapshot's trees and blobs (so this snapshot's tree too).

        Args:
            id: the snapshot (id, unique prefix or name).
            read_data: also read and hash every byte of the repository (slow; finds bit rot).

        Returns:
            A ``Verification``: ``bool(result)`` is the answer, ``detail`` restic's complaint.

        Raises:
            SnapshotNotFoundError: no such snapshot.
        """
        full = self._full_id(id)
        try:
            self._run(["check"] + (["--read-data"] if read_data else []))
        except SnapshotError as exc:
            return Verification(full[:8], False, str(exc))
        return Verification(full[:8], True, "restic check: no errors were found")
