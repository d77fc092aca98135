"""A headless run's notebook as viewers without a kernel get it (``lanenb.cli.saved_notebook``):
the widget state and views go, the widgets' fallbacks stay, camera frames become a JPEG and
pictures a JPEG would not shrink (charts) or would spoil (transparency) stay PNG.
In seconds, on a real ``DatasetPreview``'s bundle; tests/notebook/test_notebooks.py checks a
whole quickstart run saved this way."""

from __future__ import annotations

import base64
import copy

import cv2
import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from lanenb.cli.saved_notebook import LARGE_PNG, WIDGET_VIEW, for_headless_viewers, rewrite_for_headless_viewers

STATE = "application/vnd.jupyter.widget-state+json"


def _png(image: np.ndarray) -> str:
    ok, buf = cv2.imencode(".png", image)
    assert ok
    return base64.b64encode(buf.tobytes()).decode("ascii")


def _line_drawing() -> np.ndarray:
    """A large truecolour picture of thin lines and text on white, as a dense chart is: JPEG
    blurs its edges and is barely smaller than the PNG."""
    rng = np.random.default_rng(0)
    image = np.full((800, 1200, 3), 255, np.uint8)
    for _ in range(250):
        x0, x1 = (int(v) for v in rng.integers(0, 1200, 2))
        y0, y1 = (int(v) for v in rng.integers(0, 800, 2))
        cv2.line(image, (x0, y0), (x1, y1), tuple(int(c) for c in rng.integers(0, 200, 3)), 1)
    for i in range(40):
        where = (int(rng.integers(0, 1000)), int(rng.integers(20, 800)))
        cv2.putText(image, f"val.accuracy 0.{i:03d}", where, cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1)
    return image


@pytest.fixture(scope="module")
def preview(tmp_path_factory) -> dict:
    """A real ``DatasetPreview``'s bundle (its widget view, the camera frames' PNG, its text)."""
    from lanenb.notebook import DatasetPreview
    from lanenb_trainer.data.synth import synthesize

    data = tmp_path_factory.mktemp("synth")
    synthesize(data, 8, seed=0, width=640, height=360, progress=False)
    return DatasetPreview(str(data), n=6)._repr_mimebundle_()


def _notebook(preview: dict):
    preview = copy.deepcopy(preview)
    noise = np.random.default_rng(0).integers(0, 256, (300, 300), dtype=np.uint8)
    see_through = np.dstack([noise, noise, noise, noise])  # large, a JPEG would be smaller, but it has alpha
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    cell = new_code_cell("DatasetPreview(data_dir)", outputs=[
        new_output("execute_result", preview, execution_count=1),
        new_output("display_data", {WIDGET_VIEW: view, "text/plain": "VBox()"}),
        new_output("display_data", {WIDGET_VIEW: view}),  # a view with no fallback at all
        new_output("display_data", {"image/png": _png(_line_drawing()), "text/plain": "chart"}),
        new_output("display_data", {"image/png": _png(see_through), "text/plain": "transparent"}),
        new_output("stream", name="stdout", text="done\n")])
    nb = new_notebook(cells=[cell])
    nb.metadata["widgets"] = {STATE: {"state": {"abc": {"model_name": "ImageModel", "state": {}}}}}
    return nb


def test_widget_state_and_views_go_and_the_fallbacks_stay(preview):
    nb = _notebook(preview)
    before = {o.get("data", {}).get("text/plain"): o for o in nb.cells[0].outputs}
    chart_png = before["chart"]["data"]["image/png"]
    transparent_png = before["transparent"]["data"]["image/png"]
    out = for_headless_viewers(nb).cells[0].outputs
    assert "widgets" not in nb.metadata
    assert [o.output_type for o in out] == ["execute_result", "display_data", "display_data", "display_data",
                                            "stream"]  # the view with nothing else is gone
    assert not [o for o in out if WIDGET_VIEW in o.get("data", {})]
    frames = out[0]["data"]
    assert set(frames) == {"image/jpeg", "text/plain"} and frames["text/plain"] == preview["text/plain"]
    jpeg = base64.b64decode(frames["image/jpeg"])
    png = base64.b64decode(preview["image/png"])
    assert jpeg.startswith(b"\xff\xd8\xff") and len(jpeg) < len(png) / 3
    same = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    shown = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    assert same.shape == shown.shape and np.abs(same.astype(int) - shown).mean() < 4  # the same picture
    assert out[1]["data"] == {"text/plain": "VBox()"}
    assert len(chart_png) > LARGE_PNG  # large, yet a JPEG would not be a third of it
    assert out[2]["data"] == {"image/png": chart_png, "text/plain": "chart"}
    assert out[3]["data"] == {"image/png": transparent_png, "text/plain": "transparent"}


def test_the_file_is_rewritten_in_place_and_shrinks(preview, tmp_path):
    nb = _notebook(preview)
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, str(path))
    before = path.stat().st_size
    after = rewrite_for_headless_viewers(path)
    assert after == path.stat().st_size and before - after > len(preview["image/png"]) / 2
    saved = nbformat.read(str(path), as_version=4)
    nbformat.validate(saved)
    assert "widgets" not in saved.metadata and "image/jpeg" in saved.cells[0].outputs[0]["data"]
