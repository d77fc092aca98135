"""Download one archive: HTTP Range resume of ``<name>.part``, size + sha256 verification.

``<name>.part`` grows while bytes arrive; it is renamed to ``<name>`` only once its size and
(when known) sha256 match. A cut connection is resumed with ``Range: bytes=<part size>-`` up to
``retries`` times in the same call, and the ``.part`` stays on disk for the next call
otherwise. A server that ignores Range (200 instead of 206) or answers a different offset
starts the file over. The URLs of an archive are tried in order; the error lists them all.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse, urlsplit, urlunsplit

from .errors import ChecksumError, DiskFullError, NetworkError, SizeMismatchError, SourceNotFoundError
from .progress import Progress
from .sources import Archive

__all__ = ["Downloaded", "download", "sha256_file", "CHUNK"]

CHUNK = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


def shown_url(url: str) -> str:
    """``url`` as it may be recorded or printed: no ``user:password@``, and a query (a presigned or
    SAS URL's signature) reads ``?<redacted>``. The dataset record sits on a shared volume and in
    dataset snapshots, and the fetch pod's log is readable by anyone who may read pods."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<redacted>"
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "<redacted>" if parts.query else "", ""))


@dataclass
class Downloaded:
    """Where an archive landed and what it was: recorded in ``.lanenb-fetch.json``."""

    path: Path
    url: str | None
    size: int
    sha256: str
    resumed_from: int = 0


class _UrlFailed(Exception):
    """One URL did not deliver; ``kind`` is network | http | checksum | size."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def sha256_file(path: Path, progress: Progress | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
            if progress is not None:
                progress.update(len(chunk))
    return h.hexdigest()


def _disk_full(directory: Path, need: int | None, exc: OSError | None = None) -> DiskFullError:
    free = shutil.disk_usage(directory).free
    need_s = f"{need / 2**20:.1f} MiB more" if need is not None else "more space"
    return DiskFullError(errno.ENOSPC, f"no space left in {directory}: needs {need_s}, "
                         f"{free / 2**20:.1f} MiB free; free some space (the partial download is "
                         "kept and resumes) or pass a --downloads/--to directory on a larger disk")


def _check_free(directory: Path, need: int) -> None:
    if need > shutil.disk_usage(directory).free:
        raise _disk_full(directory, need)


def _verify(path: Path, archive: Archive, sha: str) -> None:
    size = path.stat().st_size
    if archive.size is not None and size != archive.size:
        raise _UrlFailed("size", f"size {size} bytes, expected {archive.size}")
    if archive.sha256 is not None and sha != archive.sha256:
        raise _UrlFailed("checksum", f"sha256 {sha}, expected {archive.sha256}")


def _hasher_of(part: Path) -> hashlib._Hash:
    h = hashlib.sha256()
    if part.exists():
        with open(part, "rb") as fh:
            while chunk := fh.read(CHUNK):
                h.update(chunk)
    return h


def _write_stream(chunks, part: Path, h, bar: Progress, directory: Path, total: int | None) -> None:
    # unbuffered: a full disk raises here, on the write, not again from a buffered close()
    with open(part, "ab", buffering=0) as fh:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[fh.write(view):]
                h.update(chunk)
                bar.update(len(chunk))
            os.fsync(fh.fileno())
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise _disk_full(directory, (total - part.stat().st_size) if total else None) from exc
            raise


def _from_file(url: str, part: Path, archive: Archive, progress_factory, directory: Path
               ) -> tuple[int, str]:
    src = Path(unquote(urlparse(url).path))
    if not src.is_file():
        raise _UrlFailed("http", "no such file")
    total = src.stat().st_size
    offset = part.stat().st_size if part.exists() else 0
    if offset > total:
        part.unlink()
        offset = 0
    _check_free(directory, total - offset)
    h = _hasher_of(part)
    bar = progress_factory("download", archive.filename, total, offset)
    try:
        with open(src, "rb") as fh:
            fh.seek(offset)
            _write_stream(iter(lambda: fh.read(CHUNK), b""), part, h, bar, directory, total)
    finally:
        bar.close()
    return offset, h.hexdigest()


def _from_http(url: str, part: Path, archive: Archive, progress_factory, directory: Path, *,
               session, retries: int, backoff: float, timeout: tuple[float, float]) -> tuple[int, str]:
    import requests

    first_offset: int | None = None
    last_error = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        offset = part.stat().st_size if part.exists() else 0
        headers = {"Accept-Encoding": "identity"}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        try:
            resp = session.get(url, stream=True, timeout=timeout, headers=headers, allow_redirects=True)
        except (requests.ConnectionError, requests.Timeout) as exc:
            last_error = f"no connection ({_reason(exc)})"
            continue
        with resp:
            if resp.status_code == 416 and offset:
                total = _range_total(resp.headers.get("Content-Range", ""))
                if total is not None and total == offset:  # the .part is whole already
                    return (offset if first_offset is None else first_offset), sha256_file(part)
                part.unlink()  # larger or unknown: start over
                last_error = "416 Range Not Satisfiable (restarted)"
                continue
            if resp.status_code in _RETRY_STATUS:
                last_error = f"HTTP {resp.status_code} {resp.reason}"
                continue
            if resp.status_code >= 400:
                raise _UrlFailed("http", f"HTTP {resp.status_code} {resp.reason}")
            total = None  # int | None, as bound by the 416 branch above
            if resp.status_code == 206:
                m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
                if not m or int(m.group(1)) != offset:
                    part.unlink(missing_ok=True)  # an offset we did not ask for: start over
                    last_error = f"unexpected Content-Range {resp.headers.get('Content-Range')!r}"
                    continue
                total = int(m.group(3)) if m.group(3) != "*" else None
            else:
                if offset:
                    part.unlink()  # Range ignored: the body is the whole file
                    offset = 0
                length = resp.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
            if first_offset is None:
                first_offset = offset
            total = total if total is not None else archive.size
            if archive.size is not None and total is not None and total != archive.size:
                raise _UrlFailed("size", f"serves {total} bytes, expected {archive.size}")
            if total is not None:
                _check_free(directory, total - offset)
            h = _hasher_of(part)
            bar = progress_factory("download", archive.filename, total, offset)
            # keep the bytes of a cut connection (urllib3 would raise and drop the last read);
            # a short body is detected below by its size and resumed from there
            resp.raw.enforce_content_length = False
            try:
                _write_stream(resp.iter_content(CHUNK), part, h, bar, directory, total)
            except (requests.RequestException, ConnectionError, TimeoutError) as exc:
                last_error = f"connection lost after {part.stat().st_size} bytes ({_reason(exc)})"
                continue
            finally:
                bar.close()
            got = part.stat().st_size
            if total is not None and got < total:
                last_error = f"connection closed after {got} of {total} bytes"
                continue
            return first_offset, h.hexdigest()
    raise _UrlFailed("network", last_error + (f"; {part.name} keeps {part.stat().st_size} bytes and "
                                              "the next fetch resumes there" if part.exists() else ""))


def _range_total(content_range: str) -> int | None:
    m = re.match(r"bytes\s+\*/(\d+)", content_range)
    return int(m.group(1)) if m else None


def _reason(exc: BaseException) -> str:
    text = str(exc)
    m = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if m:
        return m.group(1).strip()
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


def download(archive: Archive, urls: Sequence[str], directory: str | os.PathLike, *,
             progress_factory: Callable[..., Progress], retries: int = 3, backoff: float = 1.0,
             timeout: tuple[float, float] = (10.0, 60.0), session=None) -> Downloaded:
    """Download ``archive`` into ``directory`` from the first URL that delivers a verified file.

    Raises:
        SourceNotFoundError: every URL answered an HTTP error (404 ...).
        NetworkError: no URL could be reached or every connection broke (``.part`` kept).
        ChecksumError / SizeMismatchError: what arrived is not the expected file (deleted).
        DiskFullError: no space left in ``directory`` (``.part`` kept).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / archive.filename
    part = directory / (archive.filename + ".part")
    if final.exists():
        bar = progress_factory("verify", archive.filename, final.stat().st_size)
        try:
            sha = sha256_file(final, bar)
        finally:
            bar.close()
        try:
            _verify(final, archive, sha)
            return Downloaded(final, None, final.stat().st_size, sha)
        except _UrlFailed:
            final.unlink()  # a previous, different file: fetch again
    if not urls:
        raise SourceNotFoundError(f"no URL for {archive.filename}")
    if session is None:
        import requests

        session = requests.Session()
        session.headers["User-Agent"] = "lanenb-data-fetch"
    failures: list[tuple[str, _UrlFailed]] = []
    for url in urls:
        try:
            if url.startswith("file://"):
                offset, sha = _from_file(url, part, archive, progress_factory, directory)
            else:
                offset, sha = _from_http(url, part, archive, progress_factory, directory, session=session,
                                    retries=retries, backoff=backoff, timeout=timeout)
            _verify(part, archive, sha)
        except _UrlFailed as exc:
            if exc.kind in ("checksum", "size"):
                part.unlink(missing_ok=True)  # wrong bytes must not be resumed
            failures.append((url, exc))
            continue
        os.replace(part, final)
        return Downloaded(final, shown_url(url), final.stat().st_size, sha, offset)
    listed = "; ".join(f"{shown_url(url)}: {str(exc).replace(url, shown_url(url))}" for url, exc in failures)
    kinds = {exc.kind for _, exc in failures}
    if "checksum" in kinds:
        raise ChecksumError(f"{archive.filename}: wrong checksum ({listed}); the bad download was deleted")
    if "size" in kinds:
        raise SizeMismatchError(f"{archive.filename}: wrong size ({listed}); the bad download was deleted")
    if kinds == {"http"}:
        raise SourceNotFoundError(f"{archive.filename}: not found at any URL ({listed}); "
                                  "add a mirror (--mirror or LANENB_<DATASET>_MIRRORS) or pass --url")
    raise NetworkError(f"{archive.filename}: download failed ({listed}); check the network or proxy "
                       "(HTTPS_PROXY) and run the fetch again")

