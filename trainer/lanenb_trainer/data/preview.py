"""Ground-truth lanes drawn on frames, as numpy RGB images (no matplotlib: ranks import this).

Colours follow the lane *slots* of :mod:`.masks` when drawn through :func:`preview_grid`
(slot 1 red, 2 green, 3 blue, 4 yellow; dropped lanes grey), so a grid shows at a glance
whether slots are consistent across frames. With ``predictions`` (a TuSimple submission,
e.g. a run's ``predictions/test.json``) the ground truth is drawn thin in white and the
predicted lanes in colour, so a glance shows where the model is right and where it is not.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import cv2
import numpy as np

from ..atomic import write_bytes
from .labels import load_image
from .masks import assign_slots, lane_runs
from .splits import load_split

__all__ = ["LANE_COLOURS", "draw_lanes", "preview_grid", "write_png"]

LANE_COLOURS = [(230, 40, 40), (40, 200, 40), (40, 90, 255), (240, 220, 0), (200, 0, 200),
                (0, 220, 220)]  # RGB
DROPPED = (150, 150, 150)


def draw_lanes(image_rgb: np.ndarray, lanes: Sequence[Sequence[int]], h_samples: Sequence[int],
               thickness: int | None = None, colours: Sequence[tuple[int, int, int]] | None = None
               ) -> np.ndarray:
    """Copy of ``image_rgb`` with each lane as a polyline and its points as dots."""
    out = np.ascontiguousarray(image_rgb).copy()
    if thickness is None:
        thickness = max(2, int(round(out.shape[1] / 320)))
    colours = list(colours) if colours is not None else LANE_COLOURS
    for k, lane in enumerate(lanes):
        colour = tuple(int(c) for c in colours[k % len(colours)])
        for run in lane_runs(lane, h_samples):
            pts = np.round(run).astype(np.int32)
            cv2.polylines(out, [pts.reshape(-1, 1, 2)], False, colour, thickness, cv2.LINE_AA)
            for x, y in pts:
                cv2.circle(out, (int(x), int(y)), thickness + 1, colour, -1, cv2.LINE_AA)
    return out


def preview_grid(root: str | os.PathLike, n: int = 8, split: str = "train", seed: int = 0,
                 tile_width: int = 480,
                 predictions: Mapping[str, Sequence[Sequence[int]]] | None = None,
                 skip_invalid: bool = False) -> np.ndarray:
    """RGB uint8 grid of ``n`` frames (chosen by ``seed``) with lanes coloured by slot, or
    with ``predictions`` (raw_file -> predicted lanes) over thin white ground truth.
    ``skip_invalid`` draws the valid frames of a dataset that has bad label lines."""
    if n < 1:
        raise ValueError(f"n must be >= 1; got {n}")
    records = load_split(root, split, skip_invalid=skip_invalid)
    if predictions is not None:
        records = [r for r in records if r.raw_file in predictions]
        if not records:
            raise ValueError(f"no frame of split {split!r} of {root} has a prediction")
    rng = np.random.default_rng(seed)
    picks = sorted(rng.choice(len(records), size=min(n, len(records)), replace=False))
    tiles = []
    for i in picks:
        rec = records[int(i)]
        img = cv2.cvtColor(load_image(Path(root) / rec.raw_file), cv2.COLOR_BGR2RGB)
        h, w = img.shape[:2]
        if predictions is None:
            slots = assign_slots(rec.lanes, rec.h_samples, w, h)
            colours = [LANE_COLOURS[s] if s >= 0 else DROPPED for s in slots]
            img = draw_lanes(img, rec.lanes, rec.h_samples, colours=colours)
        else:
            img = draw_lanes(img, rec.lanes, rec.h_samples, thickness=1, colours=[(255, 255, 255)])
            img = draw_lanes(img, predictions[rec.raw_file], rec.h_samples)
        th = int(round(h * tile_width / w))
        tile = cv2.resize(img, (tile_width, th), interpolation=cv2.INTER_AREA)
        cv2.putText(tile, rec.raw_file, (6, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 255),
                    1, cv2.LINE_AA)
        tiles.append(tile)
    th = max(t.shape[0] for t in tiles)
    cols = math.ceil(math.sqrt(len(tiles)))
    rows = math.ceil(len(tiles) / cols)
    grid = np.zeros((rows * th, cols * tile_width, 3), np.uint8)
    for k, tile in enumerate(tiles):
        r, c = divmod(k, cols)
        grid[r * th: r * th + tile.shape[0], c * tile_width: (c + 1) * tile_width] = tile
    return grid


def write_png(path: str | os.PathLike, rgb: np.ndarray) -> Path:
    """Encode an RGB image as PNG and write it atomically."""
    ok, buf = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    if not ok:  # pragma: no cover - only on an unencodable array
        raise ValueError(f"PNG encoding failed for {path}")
    return write_bytes(path, buf.tobytes())
