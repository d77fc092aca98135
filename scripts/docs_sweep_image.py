"""The sweeps guide's picture, docs/images/sweep-report.png: the chart of a real sweep's report.

``python3 scripts/docs_sweep_image.py`` after ``python3 scripts/docs_notebooks.py``: the executed
sweep notebook (docs/notebooks/05-sweep.ipynb) ran a small sweep (6 trials on synthetic frames)
and its ``%lanesweep`` cell shows ``s.report()``, whose chart carries its PNG (drawn by
lanenb.charts from the same Vega-Lite spec JupyterLab draws); that PNG is written out as it is,
so the guide shows the run the notebook page shows.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "notebooks" / "05-sweep.ipynb"
IMAGE = ROOT / "docs" / "images" / "sweep-report.png"
CHART = "<chart: sweep "  # the text/plain of a sweep report's chart output


def sweep_chart_png(notebook: Path = NOTEBOOK) -> bytes:
    """The PNG of the first sweep chart among the notebook's outputs.

    Raises:
        LookupError: the notebook shows no sweep chart (not executed?).
    """
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data and "".join(data.get("text/plain", "")).startswith(CHART):
                return base64.b64decode(data["image/png"])
    raise LookupError(f"{notebook} shows no sweep chart: run python3 scripts/docs_notebooks.py first")


def main() -> int:
    png = sweep_chart_png()
    IMAGE.write_bytes(png)
    print(f"{IMAGE.relative_to(ROOT)}: {len(png)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
