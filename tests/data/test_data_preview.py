"""Lane drawing and preview grids (numpy RGB, no matplotlib)."""

from __future__ import annotations

import numpy as np

from lanenb_trainer.data.preview import LANE_COLOURS, draw_lanes, preview_grid


def test_draw_lanes_colours_the_labelled_points_only():
    img = np.zeros((100, 200, 3), np.uint8)
    out = draw_lanes(img, [[20, 30, -2], [150, 150, 150]], [10, 50, 90], thickness=2)
    assert img.sum() == 0  # input untouched
    assert tuple(out[50, 30]) == LANE_COLOURS[0]
    assert tuple(out[90, 150]) == LANE_COLOURS[1]
    assert out[90, 40].sum() == 0  # nothing drawn where the first lane has no point


def test_preview_grid_of_real_frames(real_root):
    grid = preview_grid(real_root, n=4, tile_width=320)
    assert grid.dtype == np.uint8 and grid.shape == (2 * 180, 2 * 320, 3)
    assert (grid.reshape(-1, 3) == LANE_COLOURS[1]).all(axis=1).sum() > 50  # ego-left lane drawn
