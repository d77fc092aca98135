"""Errors of ``lanenb data fetch``: each names the URL, file or directory concerned and what to
do next, and keeps its standard second base (``except OSError`` still catches a full disk)."""

from __future__ import annotations

from ..errors import UserError

__all__ = [
    "FetchError", "NetworkError", "SourceNotFoundError", "ChecksumError", "SizeMismatchError",
    "CorruptArchiveError", "UnsafeArchiveError", "DiskFullError", "DestinationError",
    "IncompleteDatasetError", "UnknownDatasetError",
]


class FetchError(UserError):
    """Base of every error ``fetch_dataset`` raises on purpose."""


class UnknownDatasetError(FetchError, ValueError):
    """The dataset name or a part name is not one we know."""


class NetworkError(FetchError, ConnectionError):
    """No answer from any URL of an archive (DNS, refused, timeouts, connection cut)."""


class SourceNotFoundError(FetchError, FileNotFoundError):
    """Every URL of an archive answered 404/410 (or another HTTP error)."""


class ChecksumError(FetchError, ValueError):
    """A downloaded archive's sha256 is not the expected one (the file was deleted)."""


class SizeMismatchError(FetchError, ValueError):
    """A downloaded archive's size is not the expected one (the file was deleted)."""


class CorruptArchiveError(FetchError, ValueError):
    """An archive cannot be read (truncated, bad CRC, not a zip/tar); it was deleted."""


class UnsafeArchiveError(FetchError, ValueError):
    """An archive member would land outside the destination (``..``, absolute path, escaping
    link) or is a device file/FIFO; nothing of that archive was extracted."""


class DiskFullError(FetchError, OSError):
    """No space left (ENOSPC or a free-space pre-check); names the directory and bytes needed."""


class DestinationError(FetchError, FileExistsError):
    """The target directory exists, is not empty, and is not a complete copy of the dataset."""


class IncompleteDatasetError(FetchError, ValueError):
    """The extracted data failed ``lanenb data check``; nothing was moved into place."""
