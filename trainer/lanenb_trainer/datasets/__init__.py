"""Getting the data: dataset sources, safe downloads and extraction (``lanenb data fetch``).

Lives in the trainer package because the cluster fetch Job runs it in the trainer image
(``python -m lanenb_trainer.datasets.fetch``); ``lanenb.datasets`` re-exports it for notebooks.
"""

from .errors import (
    ChecksumError,
    CorruptArchiveError,
    DestinationError,
    DiskFullError,
    FetchError,
    IncompleteDatasetError,
    NetworkError,
    SizeMismatchError,
    SourceNotFoundError,
    UnknownDatasetError,
    UnsafeArchiveError,
)
from .sources import SOURCES, Archive, DatasetSource, get_source

__all__ = [
    "fetch_dataset", "FetchResult", "is_complete", "SOURCES", "Archive", "DatasetSource", "get_source",
    "FetchError", "NetworkError", "SourceNotFoundError", "ChecksumError", "SizeMismatchError",
    "CorruptArchiveError", "UnsafeArchiveError", "DiskFullError", "DestinationError",
    "IncompleteDatasetError", "UnknownDatasetError",
]

_FROM_FETCH = ("FetchResult", "fetch_dataset", "is_complete")


def __getattr__(name: str):
    # .fetch is imported on first use, not with the package: the cluster fetch Job runs
    # ``python -m lanenb_trainer.datasets.fetch``, and runpy warns (RuntimeWarning, in the
    # Job's log) when the module it is asked to run is already in sys.modules.
    if name in _FROM_FETCH:
        from . import fetch

        return getattr(fetch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
