"""One version source (issue 44): ``lanenb_trainer.__version__``. The wheel's metadata, the
notebook widgets and the lab extension (package.json, src/version.ts) all carry the same, and
``scripts/sync_version.py`` is the one command that writes the extension's copies."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_part_carries_the_trainers_version():
    from lanenb import __version__ as notebook_side
    from lanenb.notebook.charts_widget import MODULE_VERSION
    from lanenb_trainer import __version__

    assert notebook_side == MODULE_VERSION == __version__
    assert json.loads((ROOT / "extension" / "package.json").read_text())["version"] == __version__
    ts = (ROOT / "extension" / "src" / "version.ts").read_text()
    assert f"export const MODULE_VERSION = '{__version__}';" in ts
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^version\s*=\s*\"", pyproject, re.M) is None  # no literal: a dynamic attr
    assert 'attr = "lanenb_trainer.__version__"' in pyproject
    widget = (ROOT / "extension" / "src" / "widget.ts").read_text()
    assert not re.search(r"MODULE_VERSION = '\d", widget)  # imported from version.ts, not typed again


def test_the_sync_command_writes_a_new_version_into_the_extension(tmp_path):
    ext = tmp_path / "extension"
    (ext / "src").mkdir(parents=True)
    shutil.copy(ROOT / "extension" / "package.json", ext / "package.json")
    package = json.loads((ext / "package.json").read_text())
    package["version"] = "0.0.1"
    (ext / "package.json").write_text(json.dumps(package))
    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/trainer']\n"
            "from pathlib import Path\nfrom lanenb.version import sync_extension\n"
            "print([p.name for p in sync_extension(Path(sys.argv[2]))])")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT), str(ext)], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "['package.json', 'version.ts']"
    from lanenb_trainer import __version__

    assert json.loads((ext / "package.json").read_text())["version"] == __version__
    assert (ext / "src" / "version.ts").read_text() == (ROOT / "extension" / "src" / "version.ts").read_text()
    again = subprocess.run([sys.executable, "-c", code, str(ROOT), str(ext)], capture_output=True, text=True,
                           check=True)
    assert again.stdout.strip() == "[]"  # nothing to write when they agree
