"""``python -m lanenb.datasets.fetch tusimple --to DIR``: the fetcher of
:mod:`lanenb_trainer.datasets.fetch` (one implementation; this module only re-exports it)."""

from __future__ import annotations

import sys

from lanenb_trainer.datasets.fetch import *  # noqa: F403
from lanenb_trainer.datasets.fetch import __all__, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main(prog="python -m lanenb.datasets.fetch"))
