"""Atomic file writes: a crash, Ctrl-C or full disk mid-write never leaves a half-written
checkpoint, label file, prediction file or image behind - readers see the old file or the new
one. The temp file lives beside the target (same filesystem, so ``os.replace`` is atomic) and
gets the permissions a plain ``open()`` would give (mkstemp's default 0600 would surprise users).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_open", "write_bytes", "write_text", "write_json"]

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """``open()`` for writing whose result appears at ``path`` only when the block succeeds."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open supports mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return Path(path)


def write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> Path:
    return write_text(path, json.dumps(obj, indent=indent, default=str) + "\n")
