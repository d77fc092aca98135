"""``fetch_dataset("tusimple", to=DIR)``: download, verify, extract safely, check, move into place.

Steps, each resumable: archives are downloaded into ``--downloads`` (default: the hidden
sibling ``.<DIR>.downloads``) as ``<name>.part`` and renamed when verified (see
:mod:`.download`); they are extracted (:mod:`.archives`) into a hidden temporary sibling of
``DIR``; a single top-level folder (``train_set/``) is stripped; the result must pass
``lanenb data check``; only then is it renamed to ``DIR`` with a ``.lanenb-fetch.json``
record (URLs, sizes, sha256 of what was fetched). So ``DIR`` is either absent or complete.

Idempotent: when ``DIR`` already holds every file the asked parts provide and passes the
check, nothing is downloaded. A non-empty ``DIR`` that is not complete is never touched.

Runs where the data is needed: locally (``lanenb data fetch``) and in the cluster image as
``python -m lanenb_trainer.datasets.fetch tusimple --to /mnt/tusimple`` (the Kubernetes fetch
Job), so it imports only the standard library, requests, PyYAML and tqdm (plus OpenCV for the
check).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import write_json
from .archives import extract
from .download import download
from .errors import (
    CorruptArchiveError,
    DestinationError,
    FetchError,
    IncompleteDatasetError,
    SourceNotFoundError,
    UnsafeArchiveError,
)
from .progress import LineProgress, ProgressArg, make_progress
from .sources import Archive, DatasetSource, archive_urls, config_mirrors, get_source, load_config, pinned

__all__ = ["fetch_dataset", "FetchResult", "check_layout", "is_complete", "RECORD", "add_fetch_arguments",
           "parse_url_args", "run_and_report", "main"]

RECORD = ".lanenb-fetch.json"


@dataclass
class FetchResult:
    """What ``fetch_dataset`` did. ``already_complete``: nothing was downloaded."""

    dataset: str
    root: Path
    parts: list[str]
    already_complete: bool = False
    archives: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["root"] = str(self.root)
        return d

    def __str__(self) -> str:
        if self.already_complete:
            return f"{self.dataset} at {self.root} is complete (checked); nothing fetched"
        got = ", ".join(f"{a['filename']} ({a['size']} B, sha256 {a['sha256'][:12]}...)" for a in self.archives)
        return f"{self.dataset} fetched into {self.root}: {got}"


def check_layout(root: str | os.PathLike, layout: str, *, progress: bool = False) -> list:
    """The ``lanenb data check`` problems of ``root`` for a TuSimple or CULane layout."""
    if layout == "culane":
        from ..data.culane import check_culane

        return check_culane(root, progress=progress)
    from ..data.check import check_dataset

    return check_dataset(root, progress=progress)


def _missing(root: Path, archives: Sequence[Archive]) -> list[str]:
    return [p for a in archives for p in a.provides if not (root / p).exists()]


def is_complete(root: str | os.PathLike, source: DatasetSource, archives: Sequence[Archive], *,
                progress: bool = False) -> tuple[bool, str]:
    """(complete?, why not): every provided file present and ``data check`` clean."""
    root = Path(root)
    if not root.is_dir():
        return False, f"{root} does not exist"
    missing = _missing(root, archives)
    if missing:
        return False, f"missing {', '.join(missing[:3])}" + (" ..." if len(missing) > 3 else "")
    problems = check_layout(root, source.layout, progress=progress)
    if problems:
        return False, f"data check: {len(problems)} problem(s), first: {problems[0]}"
    return True, ""


def _strip_single_folder(unpacked: Path, archive: Archive) -> Path:
    """``unpacked/train_set/`` when the archive wraps its layout in one folder."""
    entries = list(unpacked.iterdir())
    if len(entries) != 1 or not entries[0].is_dir() or entries[0].is_symlink():
        return unpacked
    inner = entries[0]
    if archive.provides and not _missing(inner, [archive]) and _missing(unpacked, [archive]):
        return inner
    return unpacked


def _merge(src: Path, dst: Path) -> None:
    """Move ``src``'s entries into ``dst``; folders merge, a later file replaces an earlier one
    (CULane's ``annotations_new`` archive updates the drivers' labels that way)."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in src.iterdir():
        target = dst / entry.name
        if entry.is_dir() and not entry.is_symlink() and target.is_dir() and not target.is_symlink():
            _merge(entry, target)
            continue
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        os.rename(entry, target)


def _prepare_destination(to: Path, source: DatasetSource, archives: Sequence[Archive],
                         progress: bool) -> bool:
    """True if ``to`` is already complete; raises if it is a non-empty incomplete folder."""
    if to.exists() and not to.is_dir():
        raise DestinationError(f"to={str(to)!r} exists and is not a directory")
    if not to.exists() or not any(to.iterdir()):
        return False
    done, why = is_complete(to, source, archives, progress=progress)
    if done:
        return True
    raise DestinationError(f"to={str(to)!r} is not empty and is not a complete {source.name} dataset "
                           f"({why}); fetch into a new or empty directory (nothing was changed)")


def fetch_dataset(
    name: str,
    to: str | os.PathLike,
    *,
    parts: Sequence[str] | None = None,
    urls: Mapping[str, Sequence[str]] | None = None,
    mirrors: Sequence[str] = (),
    default_urls: bool = True,
    downloads: str | os.PathLike | None = None,
    keep_archives: bool = False,
    check: bool = True,
    progress: ProgressArg = True,
    retries: int = 3,
    backoff: float = 1.0,
    timeout: tuple[float, float] = (10.0, 60.0),
    config: Mapping[str, Any] | None = None,
) -> FetchResult:
    """Download and prepare a dataset (``tusimple`` or ``culane``) into ``to``.

    Args:
        name: ``"tusimple"`` or ``"culane"``.
        to: the dataset root to create (absent or empty; a complete copy is left alone).
        parts: ``["train"]``, ``["test"]`` or both (default: all parts).
        urls: archive file name -> URLs to use instead of mirrors and defaults,
            e.g. ``{"train_set.zip": ["https://host/train_set.zip"]}``.
        mirrors: base URLs tried first (``<mirror>/<file name>``), before the configured
            mirrors (``$LANENB_<NAME>_MIRRORS``, ``datasets.<name>.mirrors`` in
            ``$LANENB_HOME/config.yaml``) and the default URLs.
        default_urls: also try the URLs the published guides use.
        downloads: where archives are downloaded (default: hidden sibling ``.<to>.downloads``);
            partial downloads there resume on the next call.
        keep_archives: keep the archives after a successful fetch (default: delete them).
        check: run ``lanenb data check`` on the result before moving it into place.
        progress: ``True`` for tqdm bars (notebook widgets in Jupyter), ``False`` for none, or a
            callback ``fn(stage, name, done, total)``.
        retries: resumed attempts per URL after a cut connection.

    Returns:
        FetchResult: the root, parts and what was fetched (URL, size, sha256 per archive).

    Raises:
        UnknownDatasetError: unknown dataset or part.
        DestinationError: ``to`` is not empty and not a complete copy.
        SourceNotFoundError: an archive has no URL that answers (e.g. 404 everywhere).
        NetworkError: no connection, or every connection broke (partial download kept).
        ChecksumError / SizeMismatchError: an archive is not the expected file.
        CorruptArchiveError / UnsafeArchiveError: an archive is damaged or malicious.
        DiskFullError: no space left for the downloads or the extraction.
        IncompleteDatasetError: the extracted data fails ``data check``.
    """
    config = load_config() if config is None else config
    source = pinned(get_source(name), config)
    archives = source.select(parts)
    chosen = list(parts) if parts else list(source.default_parts or source.parts)
    to = Path(to).expanduser().absolute()
    bars = make_progress(progress)
    if to.parent != to:
        to.parent.mkdir(parents=True, exist_ok=True)
    if _prepare_destination(to, source, archives, progress is True):
        return FetchResult(source.name, to, chosen, already_complete=True)

    urls = dict(urls or {})
    unknown = set(urls) - {a.filename for a in source.archives}
    if unknown:
        raise SourceNotFoundError(f"urls for unknown archive(s) {', '.join(sorted(unknown))}; "
                                  f"{source.name} archives: {', '.join(a.filename for a in source.archives)}")
    all_mirrors = list(dict.fromkeys([m.rstrip("/") for m in mirrors] + config_mirrors(source.name, config)))
    plan = []
    for a in archives:
        tries = archive_urls(a, urls=urls.get(a.filename, ()), mirrors=all_mirrors, default_urls=default_urls)
        if not tries:
            raise SourceNotFoundError(f"no URL for {a.filename}: {source.note or 'pass --url or --mirror'}")
        plan.append((a, tries))

    cache = Path(downloads).expanduser().absolute() if downloads else to.parent / f".{to.name}.downloads"
    try:
        record = _download_and_place(source, archives, plan, to, cache, chosen, bars, check=check,
                                     progress=progress, retries=retries, backoff=backoff, timeout=timeout)
    finally:
        _remove_if_empty(cache)
    if not keep_archives:
        for fetched in record.archives:
            (cache / fetched["filename"]).unlink(missing_ok=True)
        _remove_if_empty(cache)
    return record


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass  # absent, or holds archives kept for the next fetch


def _download_and_place(source: DatasetSource, archives: Sequence[Archive], plan, to: Path, cache: Path,
                        chosen: list[str], bars, *, check: bool, progress: ProgressArg, retries: int,
                        backoff: float, timeout: tuple[float, float]) -> FetchResult:
    fetched = [download(a, tries, cache, progress_factory=bars, retries=retries, backoff=backoff,
                        timeout=timeout) for a, tries in plan]
    stage = Path(tempfile.mkdtemp(prefix=f".{to.name}.fetch-", dir=to.parent))
    try:
        for a, got in zip(archives, fetched):
            unpacked = stage / ".unpack"
            try:
                extract(got.path, a.kind, unpacked, bar_factory=bars, filename=a.filename)
            except FetchError as exc:
                if isinstance(exc, (CorruptArchiveError, UnsafeArchiveError)):
                    got.path.unlink(missing_ok=True)  # never extract it again
                raise
            _merge(_strip_single_folder(unpacked, a), stage)
            shutil.rmtree(unpacked, ignore_errors=True)
        missing = _missing(stage, archives)
        if missing:
            raise IncompleteDatasetError(f"the archives of {source.name} do not contain {', '.join(missing)}; "
                                         "wrong files at the URL? (nothing was moved into place)")
        if check:
            problems = check_layout(stage, source.layout, progress=progress is True)
            if problems:
                shown = "; ".join(str(p).replace(str(stage), str(to)) for p in problems[:3])
                raise IncompleteDatasetError(f"{source.name}: data check found {len(problems)} problem(s) in the "
                                             f"extracted data, e.g. {shown} (nothing was moved into place)")
        record = FetchResult(source.name, to, chosen, archives=[
            {"filename": g.path.name, "url": g.url, "size": g.size, "sha256": g.sha256,
             "resumed_from": g.resumed_from} for g in fetched])
        write_json(stage / RECORD, {**record.to_dict(), "fetched_at": dt.datetime.now(dt.timezone.utc).isoformat()})
        if to.exists():
            to.rmdir()  # empty (checked above); rename onto it
        os.rename(stage, to)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return record


# --------------------------------------------------------------------------- command line

def add_fetch_arguments(parser: argparse.ArgumentParser, *, to_required: bool = True) -> None:
    """The fetch flags, shared by ``lanenb data fetch`` and ``python -m ...datasets.fetch``
    (``to_required=False``: ``lanenb data fetch --cluster`` fills a PVC instead)."""
    parser.add_argument("dataset", help="tusimple or culane")
    parser.add_argument("--to", required=to_required, help="dataset root to create (absent or empty)")
    parser.add_argument("--parts", nargs="+", metavar="PART", help="train and/or test (default: all)")
    parser.add_argument("--url", action="append", default=[], metavar="[ARCHIVE=]URL",
                        help="use URL for ARCHIVE (e.g. train_set.zip=https://...); without ARCHIVE= "
                             "the URL's file name names the archive. Repeatable")
    parser.add_argument("--mirror", action="append", default=[], metavar="BASE_URL",
                        help="try BASE_URL/<archive> first. Repeatable; also $LANENB_<DATASET>_MIRRORS "
                             "and datasets.<name>.mirrors in $LANENB_HOME/config.yaml")
    parser.add_argument("--no-default-urls", action="store_true",
                        help="do not fall back to the URLs the published guides use")
    parser.add_argument("--downloads", help="folder for the archives (default: .<DIR>.downloads beside --to)")
    parser.add_argument("--keep-archives", action="store_true", help="keep the archives after extracting")
    parser.add_argument("--no-check", action="store_true", help="skip the final data check")
    parser.add_argument("--retries", type=int, default=3, help="resumed attempts per URL (default 3)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--progress-every", type=float, default=None, metavar="SECONDS",
                        help="instead of bars, one plain line per step every SECONDS (bytes, rate, ETA): "
                             "for logs read later, e.g. the cluster fetch Job's pod log")


def parse_url_args(values: Sequence[str], dataset: str) -> dict[str, list[str]]:
    """``ARCHIVE=URL`` or ``URL`` (archive named by the URL's file name) -> {archive: [urls]}."""
    source = get_source(dataset)
    names = {a.filename for a in source.archives}
    out: dict[str, list[str]] = {}
    for value in values:
        key, sep, url = value.partition("=")
        if not sep or "://" in key:
            url, key = value, value.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
        if key not in names:
            raise SourceNotFoundError(f"--url {value!r}: {key!r} is not an archive of {source.name} "
                                      f"({', '.join(sorted(names))}); write ARCHIVE=URL")
        out.setdefault(key, []).append(url)
    return out


URLS_ENV = "LANENB_FETCH_URLS"  # more --url values, one per line: the cluster fetch pod's, from a Secret
MIRRORS_ENV = "LANENB_FETCH_MIRRORS"  # more --mirror values, one per line


def _from_env(name: str) -> list[str]:
    return [v.strip() for v in os.environ.get(name, "").splitlines() if v.strip()]


def run_from_args(args: argparse.Namespace) -> FetchResult:
    """Run a fetch from the parsed flags; ``--url``/``--mirror`` values may also come one per line in
    ``$LANENB_FETCH_URLS``/``$LANENB_FETCH_MIRRORS`` (a signed URL is a credential: the cluster fetch
    passes them from a Secret, never on the command line that ``kubectl get pods -o yaml`` shows)."""
    if args.retries < 0:
        raise FetchError(f"--retries must be >= 0, got {args.retries}")
    progress: ProgressArg = not args.quiet
    if args.progress_every is not None:
        if not args.progress_every >= 0:
            raise FetchError(f"--progress-every must be >= 0 seconds, got {args.progress_every}")
        progress = LineProgress(args.progress_every)
    return fetch_dataset(args.dataset, args.to, parts=args.parts,
                         urls=parse_url_args([*args.url, *_from_env(URLS_ENV)], args.dataset),
                         mirrors=[*args.mirror, *_from_env(MIRRORS_ENV)], default_urls=not args.no_default_urls,
                         downloads=args.downloads,
                         keep_archives=args.keep_archives, check=not args.no_check,
                         progress=progress, retries=args.retries)


def run_and_report(args: argparse.Namespace, error_prefix: str = "error") -> int:
    """Run the fetch ``args`` describe (from :func:`add_fetch_arguments`) as a command does:
    the summary on stderr, the result as one JSON line on stdout; exit status 2 on a
    :class:`FetchError` (printed as ``<error_prefix>: message``), else 0."""
    import json

    try:
        result = run_from_args(args)
    except FetchError as exc:
        print(f"{error_prefix}: {exc}", file=sys.stderr)
        return 2
    print(result, file=sys.stderr)
    print(json.dumps(result.to_dict()))
    return 0


def main(argv: Sequence[str] | None = None, prog: str = "python -m lanenb_trainer.datasets.fetch") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    add_fetch_arguments(parser)
    return run_and_report(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
