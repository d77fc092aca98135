"""Getting the data: dataset sources, safe downloads and extraction (``lanenb data fetch``).

Lives in the trainer package because the cluster fetch Job runs it in the trainer image
(``python -m lanenb_trainer.datasets.fetch``); ``lanenb.datasets`` re-exports it for notebooks.
"""

from .errors import (ChecksumError, CorruptArchiveError, DestinationError, DiskFullError, FetchError,
                     IncompleteDatasetError, NetworkError, SizeMismatchError, SourceNotFoundError,
                     UnknownDatasetError, UnsafeArchiveError)
from .fetch import FetchResult, fetch_dataset, is_complete
from .sources import SOURCES, Archive, DatasetSource, get_source

__all__ = [
    "fetch_dataset", "FetchResult", "is_complete", "SOURCES", "Archive", "DatasetSource", "get_source",
    "FetchError", "NetworkError", "SourceNotFoundError", "ChecksumError", "SizeMismatchError",
    "CorruptArchiveError", "UnsafeArchiveError", "DiskFullError", "DestinationError",
    "IncompleteDatasetError", "UnknownDatasetError",
]
