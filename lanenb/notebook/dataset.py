"""``DatasetPreview``: look at a dataset before training on it.

Frames with their lanes drawn (coloured by SCNN slot), split sizes, a histogram of lanes per
frame, and the problems ``lanenb data check`` would report. Built on the trainer's own reader
and preview code, so what is shown is what the ranks will read.
"""

from __future__ import annotations

import collections
import html
import os
import threading
from pathlib import Path
from typing import Any

import cv2
import ipywidgets as widgets
import numpy as np

from lanenb.charts import vocabulary
from lanenb.charts.png import render_histogram
from lanenb.errors import UserError
from lanenb.notebook.fallback import StaticFallback
from lanenb_trainer.data.check import check_dataset
from lanenb_trainer.data.labels import Problem
from lanenb_trainer.data.preview import preview_grid
from lanenb_trainer.data.splits import SPLITS, load_split

_ERROR = vocabulary.colour("error")
_OK = vocabulary.colour("ok")

__all__ = ["DatasetPreview", "DatasetError", "encode_png"]


class DatasetError(UserError, ValueError):
    """The path is not a dataset the preview can read; the message names it."""


def encode_png(rgb: np.ndarray) -> bytes:
    """An RGB image as PNG bytes, for ``ipywidgets.Image`` and the static (nbconvert) fallback."""
    ok, buf = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    if not ok:  # pragma: no cover - only for an unencodable array
        raise ValueError("PNG encoding failed")
    return buf.tobytes()


class DatasetPreview(StaticFallback, widgets.VBox):
    """Frames with lanes, split sizes, lanes-per-frame histogram and ``data check`` problems.

    A look at the data before spending GPU hours on it: bad labels and empty splits show here,
    not as a crash in epoch 1.

    Args:
        path: a dataset root in TuSimple layout.
        n: frames in the grid (1..64).
        split: the split the grid shows first (train, val or test).
        seed: which frames; the "other frames" button draws new ones.
        fetch: a dataset name (``"tusimple"``): adds a Fetch button with a progress bar that runs
            ``lanenb.fetch_dataset(fetch, to=path, **fetch_options)``; ``path`` may then be absent
            or empty, and the preview appears when the fetch ends.
        fetch_options: more keyword arguments for ``fetch_dataset`` (``parts``, ``urls``, ``mirrors`` ...).
        **kwargs: passed to ``ipywidgets.VBox`` (``layout`` ...).

    Raises:
        DatasetError: ``path`` is not a directory (and no ``fetch``) or has no label files, or
            ``n``/``split`` is bad.
    """

    def __init__(self, path: str | os.PathLike[str], n: int = 8, split: str = "train", seed: int = 0,
                 fetch: str | None = None, fetch_options: dict[str, Any] | None = None, **kwargs: Any) -> None:
        root = Path(path).expanduser()
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 64:
            raise DatasetError(f"n={n!r}: must be an integer from 1 to 64")
        if split not in SPLITS:
            raise DatasetError(f"split={split!r}: must be one of {', '.join(SPLITS)}")
        self.root, self.n, self.seed = root, n, seed
        self._png: bytes | None = None
        self.problems: list[Problem] = []
        self.sizes: dict[str, int] = {}  # frames per split
        self.lane_counts: collections.Counter[int] = collections.Counter()  # frames per lane count
        self.fetch_row = self._fetch_row(fetch, fetch_options or {}, split) if fetch else None
        super().__init__(children=[self.fetch_row] if self.fetch_row else [], **kwargs)
        if fetch and (not root.is_dir() or not any(root.iterdir())):
            return  # nothing to show until the Fetch button has filled the folder
        if not root.is_dir():
            raise DatasetError(f"path={str(path)!r}: no such directory")
        self._load(split)

    def _fetch_row(self, dataset: str, options: dict[str, Any], split: str) -> widgets.VBox:
        """Fetch button + progress bar: ``lanenb.fetch_dataset(dataset, to=path)`` in a thread."""
        self.fetch_button = widgets.Button(description=f"Fetch {dataset}", icon="download")
        self.fetch_bar = widgets.FloatProgress(value=0, min=0, max=1, layout=widgets.Layout(width="40%"))
        self.fetch_status = widgets.HTML("")

        def progress(stage: str, name: str, done: int, total: int | None) -> None:
            self.fetch_bar.value = done / total if total else 0
            size = f"{done / 2**20:.1f}" + (f" / {total / 2**20:.1f}" if total else "") + " MiB"
            self.fetch_status.value = html.escape(f"{stage} {name}: {size}")

        def run() -> None:
            from lanenb_trainer.datasets.fetch import fetch_dataset

            try:
                result = fetch_dataset(dataset, self.root, progress=progress, **options)
                self.fetch_status.value = html.escape(str(result))
                self.fetch_bar.value = 1
                self._load(split)
            except UserError as exc:
                self.fetch_status.value = f"<span style='color:{_ERROR}'>{html.escape(str(exc))}</span>"
            finally:
                self.fetch_button.disabled = False

        def click(_button: Any = None) -> None:
            self.fetch_button.disabled = True
            self.fetch_thread = threading.Thread(target=run, name="lanenb-fetch", daemon=True)
            self.fetch_thread.start()

        self.fetch_button.on_click(click)
        return widgets.VBox([widgets.HBox([self.fetch_button, self.fetch_bar]), self.fetch_status])

    def _load(self, split: str) -> None:
        root = self.root
        self.problems = check_dataset(root)
        self.sizes = {}
        self.lane_counts = collections.Counter()
        for name in SPLITS:
            try:
                records = load_split(root, name, skip_invalid=True)
            except (ValueError, OSError):
                self.sizes[name] = 0
                continue
            self.sizes[name] = len(records)
            for rec in records:  # the splits are disjoint: every frame counted once
                self.lane_counts[sum(1 for lane in rec.lanes if any(x >= 0 for x in lane))] += 1
        if not any(self.sizes.values()):
            raise DatasetError(f"path={str(root)!r}: no labelled frames (expected label_data*.json / "
                               f"test_label.json in the TuSimple layout)")
        available = [s for s in SPLITS if self.sizes.get(s)]
        self.split = widgets.Dropdown(options=available, value=split if split in available else available[0],
                                      description="split")
        self.other = widgets.Button(description="other frames", icon="refresh")
        self.grid = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.table = widgets.HTML(self._table_html())
        counts = [self.lane_counts.get(k, 0) for k in range(0, max(self.lane_counts or {0: 0}) + 1)]
        self._hist = render_histogram(counts, [str(k) for k in range(len(counts))],
                                      "lanes per frame (all splits)", "lanes")
        self.histogram = widgets.Image(value=self._hist, format="png")
        self.problem_box = widgets.HTML(self._problems_html())
        self.split.observe(lambda _c: self._draw(), names="value")
        self.other.on_click(self._next)
        self.children = ([self.fetch_row] if self.fetch_row else []) + [
            widgets.HTML(f"<b>{html.escape(str(root))}</b>"), widgets.HBox([self.split, self.other]), self.grid,
            widgets.HBox([self.table, self.histogram]), self.problem_box,
        ]
        self._draw()

    def _next(self, _button: Any = None) -> None:
        self.seed += 1
        self._draw()

    def _draw(self) -> None:
        self._png = encode_png(preview_grid(self.root, n=self.n, split=self.split.value, seed=self.seed,
                                              skip_invalid=True))
        self.grid.value = self._png

    def _table_html(self) -> str:
        rows = "".join(f"<tr><td style='padding:0 10px'>{k}</td><td style='text-align:right'>{v}</td></tr>"
                       for k, v in self.sizes.items())
        total = sum(self.lane_counts.values())
        return (f"<table><tr><th>split</th><th>frames</th></tr>{rows}</table>"
                f"<small>{total} frames counted for the histogram</small>")

    def _problems_html(self) -> str:
        if not self.problems:
            return f"<span style='color:{_OK}'>data check: no problems</span>"
        shown = "<br>".join(html.escape(str(p)) for p in self.problems[:20])
        more = f"<br>... and {len(self.problems) - 20} more" if len(self.problems) > 20 else ""
        return f"<div style='color:{_ERROR}'><b>data check: {len(self.problems)} problem(s)</b><br>{shown}{more}</div>"

    def static_png(self) -> bytes | None:
        return self._png

    def static_text(self) -> str:
        sizes = ", ".join(f"{k} {v}" for k, v in self.sizes.items())
        hist = ", ".join(f"{k} lanes: {v}" for k, v in sorted(self.lane_counts.items()))
        problems = f"{len(self.problems)} problem(s): " + "; ".join(str(p) for p in self.problems[:5]) \
            if self.problems else "no problems"
        return f"dataset {self.root}: {sizes} frames\nlanes per frame: {hist}\ndata check: {problems}"
