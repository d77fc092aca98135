"""SCNN post-processing: real labels rendered into 5-channel probability maps at the
network's size come back as TuSimple lanes that score high; damaged maps score lower."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from lanenb_trainer.evaluation import evaluate
from lanenb_trainer.models.postprocess import NO_POINT, batch_to_predictions, probmaps_to_lanes

ORIG = (720, 1280)
NET = (288, 800)


def render(lanes, h_samples, net=NET, orig=ORIG, thickness=5):
    """One-hot [5, H, W] map + existence: lanes ordered left to right by their lowest point
    into slots 1..4, drawn as polylines (sub-pixel) at the network's resolution."""
    H, W = net
    sy, sx = H / orig[0], W / orig[1]
    visible = [[(x, y) for x, y in zip(lane, h_samples) if x >= 0] for lane in lanes]
    visible = [v for v in visible if len(v) >= 2]
    visible.sort(key=lambda pts: pts[-1][0])
    label = np.zeros((H, W), np.uint8)
    exist = np.zeros(4, np.float32)
    for slot, pts in enumerate(visible[:4], start=1):
        arr = np.array([[((x + 0.5) * sx - 0.5) * 16, ((y + 0.5) * sy - 0.5) * 16] for x, y in pts])
        cv2.polylines(label, [np.rint(arr).astype(np.int32)], False, slot, thickness, cv2.LINE_8, 4)
        exist[slot - 1] = 1.0
    prob = np.eye(5, dtype=np.float32)[label].transpose(2, 0, 1)
    return prob, exist


def roundtrip(records, shift_px: int = 0, **kw):
    preds = []
    for r in records:
        prob, exist = render(r["lanes"], r["h_samples"])
        if shift_px:
            prob = np.roll(prob, shift_px, axis=2)
        lanes = probmaps_to_lanes(prob, exist, r["h_samples"], ORIG, **kw)
        preds.append({"raw_file": r["raw_file"], "lanes": lanes, "run_time": 20.0})
    return evaluate(preds, records)


def test_rendered_real_labels_come_back_accurately(real_gt):
    sample = real_gt[::25]  # 115 real frames
    res = roundtrip(sample)
    assert res.accuracy > 0.95, res.summary()
    assert res.fn < 0.05 and res.fp < 0.05


def test_shifted_maps_score_lower(real_gt):
    sample = real_gt[::50]
    good = roundtrip(sample)
    a_bit = roundtrip(sample, shift_px=16)  # 16 net px = 25.6 px at 1280 wide
    a_lot = roundtrip(sample, shift_px=32)  # 51.2 px: beyond most lanes' threshold
    assert good.accuracy > a_bit.accuracy > a_lot.accuracy, (good, a_bit, a_lot)
    assert a_lot.accuracy < good.accuracy - 0.3
    assert a_lot.fn > good.fn + 0.3 and a_lot.fp > good.fp + 0.3


def test_missing_existence_drops_the_lane(real_gt):
    r = real_gt[0]
    prob, exist = render(r["lanes"], r["h_samples"])
    assert len(probmaps_to_lanes(prob, exist, r["h_samples"], ORIG)) == 4
    exist[2] = 0.4
    lanes = probmaps_to_lanes(prob, exist, r["h_samples"], ORIG)
    assert len(lanes) == 3
    assert len(probmaps_to_lanes(prob, exist, r["h_samples"], ORIG, exist_threshold=0.3)) == 4


def test_points_only_where_the_map_is_confident():
    prob = np.zeros((5, 288, 800), np.float32)
    prob[0] = 1.0
    rows = list(range(240, 720, 10))
    # slot 1: a vertical lane at net column 400 on the lower half only, probability 0.6
    prob[1, 200:, 398:403] = 0.6
    prob[0, 200:, 398:403] = 0.4
    lanes = probmaps_to_lanes(prob, [0.9, 0.1, 0.1, 0.1], rows, ORIG)
    assert len(lanes) == 1
    lane = lanes[0]
    expected_x = round((400 + 0.5) * 1280 / 800 - 0.5)
    for y, x in zip(rows, lane):
        net_row = round((y + 0.5) * 0.4 - 0.5)
        assert x == (expected_x if net_row >= 200 else NO_POINT), (y, x)
    assert probmaps_to_lanes(prob, [0.9, 0, 0, 0], rows, ORIG, prob_threshold=0.7) == []


def test_min_points_drops_short_lanes():
    prob = np.zeros((5, 288, 800), np.float32)
    prob[0] = 1.0
    prob[2, 284, 100] = 1.0  # one row only (h_sample 710)
    prob[0, 284, 100] = 0.0
    rows = list(range(240, 720, 10))
    assert probmaps_to_lanes(prob, [0, 1, 0, 0], rows, ORIG) == []
    lanes = probmaps_to_lanes(prob, [0, 1, 0, 0], rows, ORIG, min_points=1)
    assert lanes[0][-1] == round(100.5 * 1.6 - 0.5) and lanes[0][:-1] == [NO_POINT] * 47


def test_rows_outside_the_image_get_no_point(real_gt):
    r = real_gt[0]
    prob, exist = render(r["lanes"], r["h_samples"])
    lanes = probmaps_to_lanes(prob, exist, r["h_samples"] + [720, 800], ORIG)
    assert all(lane[-2:] == [NO_POINT, NO_POINT] for lane in lanes)


def test_torch_tensors_give_the_same_lanes(real_gt):
    r = real_gt[5]
    prob, exist = render(r["lanes"], r["h_samples"])
    a = probmaps_to_lanes(prob, exist, r["h_samples"], ORIG)
    b = probmaps_to_lanes(torch.from_numpy(prob), torch.from_numpy(exist), r["h_samples"], ORIG)
    assert a == b and len(a) == 4


def test_real_softmax_output_shape_is_accepted():
    logits = torch.randn(5, 36, 100)
    prob = torch.softmax(logits, dim=0)
    lanes = probmaps_to_lanes(prob, torch.sigmoid(torch.tensor([5.0, 5.0, -5.0, -5.0])),
                              list(range(160, 720, 10)), ORIG, prob_threshold=0.2)
    assert len(lanes) <= 2
    assert all(len(l) == 56 and all(v == NO_POINT or 0 <= v < 1280 for v in l) for l in lanes)


def test_batch_to_predictions(real_gt):
    recs = real_gt[:3]
    maps = [render(r["lanes"], r["h_samples"]) for r in recs]
    prob = torch.from_numpy(np.stack([m[0] for m in maps]))
    exist = torch.from_numpy(np.stack([m[1] for m in maps]))
    preds = batch_to_predictions(
        prob, exist, [r["raw_file"] for r in recs], recs[0]["h_samples"], ORIG, run_time_ms=12.5
    )
    assert [p["raw_file"] for p in preds] == [r["raw_file"] for r in recs]
    assert all(p["run_time"] == 12.5 and p["h_samples"] == recs[0]["h_samples"] for p in preds)
    res = evaluate(preds, recs)
    assert res.accuracy > 0.9
    per_frame = batch_to_predictions(
        prob, exist, [r["raw_file"] for r in recs], [r["h_samples"] for r in recs], [ORIG] * 3,
        run_time_ms=[1.0, 2.0, 3.0],
    )
    assert [p["run_time"] for p in per_frame] == [1.0, 2.0, 3.0]
    assert [p["lanes"] for p in per_frame] == [p["lanes"] for p in preds]


ROWS = list(range(240, 720, 10))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(prob=np.zeros((288, 800))),
         r"prob must have shape \[1 \+ lane slots, H, W\] \(e\.g\. \[5, 288, 800\]\), got \[288, 800\]"),
        (dict(exist=[1.0, 1.0]), r"exist must have 4 values \(one per lane slot of prob\), got 2"),
        (dict(exist=[3.0, -2.0, 0.0, 0.0]),
         r"exist must be probabilities in \[0, 1\] \(apply a sigmoid to existence logits\), got values in \[-2, 3\]"),
        (dict(prob=np.full((5, 4, 4), 7.0)),
         (r"prob must hold probabilities in \[0, 1\] \(apply softmax over the channel dimension to the logits\), "
          r"got values in \[7, 7\]")),
        (dict(orig_size=(720,)), r"orig_size must be \(height, width\) in pixels, two positive integers; got \(720,\)"),
        (dict(orig_size=(0, 1280)),
         r"orig_size must be \(height, width\) in pixels, two positive integers; got \(0, 1280\)"),
        (dict(h_samples=[]), r"h_samples must be a non-empty list of row numbers, got \[\]"),
        (dict(prob_threshold=1.5),
         r"exist_threshold must be in \[0, 1\] and prob_threshold in \[0, 1\); got 0\.5 and 1\.5"),
        (dict(min_points=0), r"min_points must be a positive integer, got 0"),
    ],
)
def test_bad_inputs_are_named(kwargs, message):
    args = dict(prob=np.eye(5, dtype=np.float32)[np.zeros((8, 8), int)].transpose(2, 0, 1),
                exist=[1.0, 0.0, 0.0, 0.0], h_samples=ROWS, orig_size=ORIG)
    args.update(kwargs)
    with pytest.raises(ValueError, match="^" + message + "$"):
        probmaps_to_lanes(args.pop("prob"), args.pop("exist"), args.pop("h_samples"), args.pop("orig_size"), **args)


def test_batch_bad_inputs_are_named():
    prob = np.zeros((2, 5, 8, 8), np.float32)
    exist = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match=r"^exist must have shape \[B=2, lane slots\], got \[3, 4\]$"):
        batch_to_predictions(prob, np.zeros((3, 4)), ["a", "b"], ROWS, ORIG, run_time_ms=1)
    with pytest.raises(ValueError, match=r"^raw_files must list one path per frame of the batch \(2\)"):
        batch_to_predictions(prob, exist, ["a"], ROWS, ORIG, run_time_ms=1)
    with pytest.raises(ValueError, match=r"^run_time_ms must be one number or one per frame \(2\), got 3$"):
        batch_to_predictions(prob, exist, ["a", "b"], ROWS, ORIG, run_time_ms=[1, 2, 3])
    with pytest.raises(ValueError, match=r"^run_time_ms must be non-negative milliseconds, got -1$"):
        batch_to_predictions(prob, exist, ["a", "b"], ROWS, ORIG, run_time_ms=-1)
    with pytest.raises(ValueError,
                       match=r"^orig_sizes must be one \(h, w\) for the batch or one per frame \(2\), got 3$"):
        batch_to_predictions(prob, exist, ["a", "b"], ROWS, [ORIG] * 3, run_time_ms=1)
