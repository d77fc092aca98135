"""Fixtures of the multi-host tests; helpers live in ``multihost_support`` / ``cluster_support``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from multihost_support import machine, synth_volume  # noqa: F401
