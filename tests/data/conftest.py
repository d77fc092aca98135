"""Fixtures of the data tests; the helpers and fixtures live in ``data_support`` (a uniquely named
module: every test folder has a conftest, so tests never ``from conftest import``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from data_support import real_root, synth_root  # noqa: F401
