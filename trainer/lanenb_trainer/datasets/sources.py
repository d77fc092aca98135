"""Which archives make up a dataset, where they are downloaded from, and what they must contain.

URLs, in the order they are tried for one archive:

1. ``urls`` given by the caller for that archive (``--url train_set=URL``): only those;
2. mirrors (``--mirror``, then ``$LANENB_<DATASET>_MIRRORS`` (space or comma separated), then
   ``datasets.<name>.mirrors`` in ``$LANENB_HOME/config.yaml``): ``<mirror>/<file name>``;
3. the default URLs, the ones the published guides use (unless ``default_urls=False``).

No checksums are published for TuSimple: sizes and sha256 are ``None`` unless pinned in the
config (``datasets.tusimple.sha256: {train_set.zip: <hex>}``); what was fetched is recorded in
``.lanenb-fetch.json`` in the dataset root.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .errors import FetchError, UnknownDatasetError

__all__ = ["Archive", "DatasetSource", "SOURCES", "get_source", "load_config", "config_mirrors",
           "archive_urls", "lanenb_home"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Archive:
    """One file to download. ``kind``: ``zip``, ``tar`` (any compression) or ``file`` (copied
    as is). ``provides``: paths (relative to the dataset root) that must exist afterwards."""

    filename: str
    urls: tuple[str, ...] = ()
    kind: str = "zip"
    size: int | None = None
    sha256: str | None = None
    provides: tuple[str, ...] = ()


@dataclass(frozen=True)
class DatasetSource:
    """A dataset: its archives, grouped into parts (``train``, ``test``, ...)."""

    name: str
    archives: tuple[Archive, ...]
    parts: Mapping[str, tuple[str, ...]]  # part -> archive file names
    layout: str = "tusimple"  # which checker validates the result: tusimple | culane
    note: str = ""  # said when no URL is known (e.g. CULane lives on Google Drive)
    default_parts: tuple[str, ...] = field(default=())

    def archive(self, filename: str) -> Archive:
        for a in self.archives:
            if a.filename == filename:
                return a
        raise UnknownDatasetError(f"{self.name} has no archive {filename!r}; archives: "
                                  f"{', '.join(a.filename for a in self.archives)}")

    def select(self, parts: Iterable[str] | None = None) -> list[Archive]:
        """The archives of ``parts`` (default: all parts), in a stable order."""
        chosen = list(parts) if parts else list(self.default_parts or self.parts)
        wanted: list[str] = []
        for part in chosen:
            if part not in self.parts:
                raise UnknownDatasetError(f"part={part!r}: {self.name} has parts {', '.join(self.parts)}")
            wanted += [f for f in self.parts[part] if f not in wanted]
        return [self.archive(f) for f in wanted]


_S3 = "https://s3.us-east-2.amazonaws.com/benchmark-frontend"
_CULANE_DRIVERS = ("driver_23_30frame", "driver_161_90frame", "driver_182_30frame",
                   "driver_37_30frame", "driver_100_30frame", "driver_193_90frame")

SOURCES: dict[str, DatasetSource] = {
    "tusimple": DatasetSource(
        name="tusimple",
        archives=(
            Archive("train_set.zip", (f"{_S3}/datasets/1/train_set.zip",), "zip",
                    provides=("label_data_0313.json", "label_data_0531.json", "label_data_0601.json")),
            Archive("test_set.zip", (f"{_S3}/datasets/1/test_set.zip",), "zip",
                    provides=("test_tasks_0627.json",)),
            Archive("test_label.json", (f"{_S3}/truth/1/test_label.json",), "file",
                    provides=("test_label.json",)),
        ),
        parts={"train": ("train_set.zip",), "test": ("test_set.zip", "test_label.json")},
    ),
    "culane": DatasetSource(
        name="culane",
        archives=tuple(Archive(f"{d}.tar.gz", (), "tar", provides=(d,)) for d in _CULANE_DRIVERS) + (
            Archive("annotations_new.tar.gz", (), "tar"),
            Archive("laneseg_label_w16.tar.gz", (), "tar", provides=("laneseg_label_w16",)),
            Archive("list.tar.gz", (), "tar", provides=("list/train_gt.txt", "list/test.txt")),
        ),
        parts={"train": tuple(f"{d}.tar.gz" for d in _CULANE_DRIVERS[:3])
               + ("annotations_new.tar.gz", "laneseg_label_w16.tar.gz", "list.tar.gz"),
               "test": tuple(f"{d}.tar.gz" for d in _CULANE_DRIVERS[3:]) + ("list.tar.gz",)},
        layout="culane",
        note=("CULane is published on Google Drive / Baidu Pan only, with no direct-download URL: "
              "put the archives on a server you can reach and set LANENB_CULANE_MIRRORS, "
              "datasets.culane.mirrors in $LANENB_HOME/config.yaml, or pass --mirror"),
    ),
}


def get_source(name: str) -> DatasetSource:
    try:
        return SOURCES[name.lower()]
    except (KeyError, AttributeError):
        raise UnknownDatasetError(f"dataset={name!r}: known datasets are {', '.join(SOURCES)}") from None


def lanenb_home() -> Path:
    """``$LANENB_HOME`` or ``~/.lanenb`` (the same rule as the job registry)."""
    return Path(os.environ.get("LANENB_HOME") or Path.home() / ".lanenb").expanduser()


def load_config(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """``$LANENB_HOME/config.yaml`` as a dict (``{}`` when absent); a broken file is an error."""
    path = Path(path) if path is not None else lanenb_home() / "config.yaml"
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise FetchError(f"config {path} is not readable YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise FetchError(f"config {path}: expected a mapping at the top, got {type(data).__name__}")
    return data


def _dataset_config(name: str, config: Mapping[str, Any]) -> Mapping[str, Any]:
    section = (config.get("datasets") or {}).get(name) or {}
    if not isinstance(section, Mapping):
        raise FetchError(f"config datasets.{name} must be a mapping, got {type(section).__name__}")
    return section


def _check_url(url: str, what: str) -> str:
    if not isinstance(url, str) or not re.match(r"^(https?|file)://", url):
        raise FetchError(f"{what}={url!r}: expected an http://, https:// or file:// URL")
    return url


def config_mirrors(name: str, config: Mapping[str, Any] | None = None) -> list[str]:
    """Mirrors from ``$LANENB_<NAME>_MIRRORS`` then ``config.yaml``, de-duplicated, in order."""
    env = os.environ.get(f"LANENB_{name.upper()}_MIRRORS", "")
    found = [m for m in re.split(r"[\s,]+", env) if m]
    listed = _dataset_config(name, config if config is not None else load_config()).get("mirrors") or []
    if isinstance(listed, str):
        listed = [listed]
    out: list[str] = []
    for m in found + list(listed):
        _check_url(m, "mirror")
        if m.rstrip("/") not in out:
            out.append(m.rstrip("/"))
    return out


def pinned(source: DatasetSource, config: Mapping[str, Any] | None = None) -> DatasetSource:
    """``source`` with sizes/sha256 pinned in ``datasets.<name>.{sha256,size}`` of the config."""
    section = _dataset_config(source.name, config if config is not None else load_config())
    sums, sizes = section.get("sha256") or {}, section.get("size") or {}
    archives = []
    for a in source.archives:
        sha = sums.get(a.filename, a.sha256)
        if sha is not None and not _SHA256.match(str(sha).lower()):
            raise FetchError(f"config datasets.{source.name}.sha256.{a.filename}={sha!r}: not a sha256 hex digest")
        size = sizes.get(a.filename, a.size)
        if size is not None and (not isinstance(size, int) or size < 0):
            raise FetchError(f"config datasets.{source.name}.size.{a.filename}={size!r}: not a byte count")
        archives.append(replace(a, sha256=sha.lower() if sha else None, size=size))
    return replace(source, archives=tuple(archives))


def archive_urls(archive: Archive, *, urls: Sequence[str] = (), mirrors: Sequence[str] = (),
                 default_urls: bool = True) -> list[str]:
    """The URLs to try for one archive (see the module docstring for the order)."""
    if urls:
        return [_check_url(u, "url") for u in urls]
    out = [f"{m.rstrip('/')}/{archive.filename}" for m in mirrors]
    if default_urls:
        out += [u for u in archive.urls if u not in out]
    return out
