"""What a notebook executed headlessly keeps: its outputs as a viewer without a kernel shows them.

A papermill run saves every widget twice: its live view (a ``widget-view`` output pointing at a
model, plus the models' whole state in ``metadata.widgets``, image bytes and chart rows included)
and the fallback ``lanenb.notebook.fallback.StaticFallback`` adds to the same output (a PNG and
text). No headless viewer (GitHub, nbviewer, nbconvert, the docs site) draws the saved state, and
JupyterLab, given a view whose model is gone, shows "Error displaying widget: model not found"
instead of the fallback; the state was half of the quickstart's 2.2 MB. So a headless run keeps
the fallback only, and the photo grids (``DatasetPreview``, ``PredictionViewer``: camera frames,
~450 kB each as PNG) as JPEG, a seventh of the size; line charts stay PNG (sharper and smaller).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

__all__ = ["WIDGET_VIEW", "for_headless_viewers", "rewrite_for_headless_viewers", "smaller_picture"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# a PNG smaller than this (base64 characters) is kept whatever it holds: not worth a lossy copy
LARGE_PNG = 100_000
# JPEG at this quality keeps thin lane lines and the frame captions readable
JPEG_QUALITY = 85
# a JPEG is kept only when it is at most this share of the PNG: true of photos (1/5 to 1/7),
# never of line charts (flat colours compress better as PNG), so charts stay PNG by measure
JPEG_GAIN = 1 / 3
_PNG_TRUECOLOUR = 2  # IHDR colour type without alpha: what cv2 can re-encode without losing anything


def smaller_picture(data: dict[str, Any]) -> None:
    """A large photographic PNG in an output's ``data`` becomes a JPEG, in place (see
    ``JPEG_GAIN``); a chart, a small picture or one with transparency is left as it is."""
    png = data.get("image/png")
    if not isinstance(png, str) or len(png) < LARGE_PNG:
        return
    raw = base64.b64decode(png)
    if len(raw) < 26 or raw[25] != _PNG_TRUECOLOUR:
        return
    import cv2
    import numpy as np

    image = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        return
    ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok or len(jpeg) > JPEG_GAIN * len(raw):
        return
    del data["image/png"]
    data["image/jpeg"] = base64.b64encode(jpeg.tobytes()).decode("ascii")


def for_headless_viewers(nb: Any) -> Any:
    """``nb`` (an ``nbformat`` notebook) changed in place and returned: no ``metadata.widgets``,
    no widget views (an output left with nothing else is dropped), large photos as JPEG."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data is not None:
                data.pop(WIDGET_VIEW, None)
                if not data:
                    continue
                smaller_picture(data)
            kept.append(out)
        cell.outputs = kept
    return nb


def rewrite_for_headless_viewers(path: Path) -> int:
    """Rewrite the notebook file at ``path`` with ``for_headless_viewers``; its new size in bytes."""
    import nbformat

    nb = nbformat.read(str(path), as_version=nbformat.NO_CONVERT)
    nbformat.write(for_headless_viewers(nb), str(path))
    return path.stat().st_size
