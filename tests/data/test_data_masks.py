"""Lane slots (SCNN convention, ego lanes inward-out), mirroring, mask rendering, affine maths."""

from __future__ import annotations

import numpy as np
import pytest

from lanenb_trainer.data.augment import (
    AugmentConfig,
    AugmentParams,
    affine_matrix,
    apply_affine,
    colour_matrix,
    frame_rng,
    sample_params,
)
from lanenb_trainer.data.masks import assign_slots, bottom_crossing, existence, lane_runs, mirror_slots, render_mask

HS = list(range(400, 711, 10))


def straight(x_bottom: float, slope: float) -> list[int]:
    """Lane whose x changes by ``slope`` px per row going up from the bottom row 719."""
    xs = [int(round(x_bottom + slope * (719 - y))) for y in HS]
    return [x if 0 <= x < 1280 else -2 for x in xs]


def test_bottom_crossing_extrapolates_lanes_that_stop_early():
    lane = [x if y <= 600 else -2 for x, y in zip(straight(300, 0.5), HS)]
    assert bottom_crossing(lane, HS, 719) == pytest.approx(300, abs=1.5)
    assert bottom_crossing([-2] * len(HS), HS, 719) is None


@pytest.mark.parametrize("bottoms, expected", [
    ([400, 900], [1, 2]),                      # two ego lanes -> slots 2, 3 (0-based 1, 2)
    ([-300, 400, 900], [0, 1, 2]),
    ([400, 900, 1500], [1, 2, 3]),
    ([-300, 400, 900, 1500], [0, 1, 2, 3]),
    ([-900, -300, 400, 900, 1500], [-1, 0, 1, 2, 3]),  # 3rd lane on the left is dropped
])
def test_slots_count_outward_from_the_ego_lane(bottoms, expected):
    lanes = [straight(b, (640 - b) / 400) for b in bottoms]
    order = np.random.default_rng(0).permutation(len(lanes))  # input order must not matter
    slots = assign_slots([lanes[i] for i in order], HS, 1280, 720)
    assert slots == [expected[i] for i in order]


def test_lanes_without_points_get_no_slot():
    assert assign_slots([[-2] * len(HS), straight(400, 0.3)], HS, 1280, 720) == [-1, 1]


def test_flip_mirrors_slots_consistently_with_geometry():
    lanes = [straight(b, (640 - b) / 400) for b in (-300, 400, 900, 1500)]
    flipped = [[1279 - x if x >= 0 else -2 for x in lane] for lane in lanes]
    assert assign_slots(flipped, HS, 1280, 720) == mirror_slots(assign_slots(lanes, HS, 1280, 720))
    assert mirror_slots([0, 1, 2, 3, -1]) == [3, 2, 1, 0, -1]


def test_lane_runs_split_at_gaps():
    runs = lane_runs([10, 11, -2, 13, 14, 15], [1, 2, 3, 4, 5, 6])
    assert [r[:, 0].tolist() for r in runs] == [[10, 11], [13, 14, 15]]


def test_render_mask_draws_thick_lines_with_slot_ids():
    run = np.array([[100.0, 0.0], [100.0, 99.0]])
    mask = render_mask([(2, [run]), (-1, [run + [50, 0]])], 100, 200, thickness=9)
    assert set(np.unique(mask)) == {0, 3}
    assert (mask[50, 96:105] == 3).all() and mask[50, 90] == 0 and mask[50, 150] == 0
    assert existence(mask).tolist() == [0, 0, 1, 0]


def test_affine_resize_maps_pixel_centres():
    m = affine_matrix((720, 1280), (288, 800))
    pts = apply_affine(m, np.array([[-0.5, -0.5], [1279.5, 719.5]]))
    assert np.allclose(pts, [[-0.5, -0.5], [799.5, 287.5]])


def test_affine_flip_mirrors_x_only():
    plain = affine_matrix((720, 1280), (288, 800))
    flip = affine_matrix((720, 1280), (288, 800), AugmentParams(flip=True))
    p = np.array([[100.0, 300.0]])
    a, b = apply_affine(plain, p)[0], apply_affine(flip, p)[0]
    assert b[0] == pytest.approx(799 - a[0]) and b[1] == pytest.approx(a[1])


def test_params_are_a_function_of_seed_epoch_index():
    cfg = AugmentConfig()
    a = sample_params(frame_rng(1, 2, 3), cfg)
    assert a == sample_params(frame_rng(1, 2, 3), cfg)
    assert a != sample_params(frame_rng(1, 3, 3), cfg)
    assert 1.0 <= a.scale <= 1.15 and abs(a.angle_deg) <= 3.0


def test_colour_matrix_normalises_and_swaps_bgr_to_rgb():
    m = colour_matrix()
    bgr = np.array([10.0, 20.0, 200.0, 1.0])
    rgb = m @ bgr
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    assert np.allclose(rgb, (np.array([200, 20, 10]) / 255 - mean) / std, atol=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    ({"scale": (1.2, 1.0)}, "scale range must satisfy 0 < lo <= hi; got (1.2, 1.0)"),
    ({"flip_p": 1.5}, "flip_p must be in [0, 1]; got 1.5"),
    ({"brightness": -0.1}, "brightness must be >= 0; got -0.1"),
])
def test_bad_augment_config(kwargs, message):
    with pytest.raises(ValueError) as info:
        AugmentConfig(**kwargs)
    assert str(info.value) == message
