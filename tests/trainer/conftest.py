"""Fixtures of the trainer tests; the helpers and fixtures live in ``trainer_support`` (a uniquely named
module: every test folder has a conftest, so tests never ``from conftest import``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from homes import lanenb_home  # noqa: F401  # a foreground `lanenb train` is a job: its own registry
from trainer_support import synth_root  # noqa: F401
