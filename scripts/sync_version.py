"""Write the one version (trainer/lanenb_trainer/__init__.py) into the lab extension's
package.json and src/version.ts: ``python3 scripts/sync_version.py`` after changing it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "trainer")]

from lanenb.version import sync_extension  # noqa: E402

if __name__ == "__main__":
    for path in sync_extension(ROOT / "extension"):
        print(f"wrote {path.relative_to(ROOT)}")
