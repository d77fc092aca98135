"""TuSimpleDataset on real frames (both label scales), synthetic frames, splits and augmentation."""

from __future__ import annotations

import json
import shutil

import cv2
import numpy as np
import pytest
import torch
from data_support import REAL_FRAMES, frame, make_root

from lanenb_trainer.data.augment import AugmentConfig, affine_matrix, apply_affine, frame_rng, sample_params
from lanenb_trainer.data.labels import LabelError
from lanenb_trainer.data.masks import assign_slots, lane_runs, mirror_slots
from lanenb_trainer.data.tusimple import TuSimpleDataset, read_image_size


def lane_hits(ds: TuSimpleDataset, i: int, sample: dict, params=None) -> tuple[int, int, int]:
    """(label points inside the output, those on mask pixels of their own slot, on any lane)."""
    rec = ds.records[i]
    h, w = ds.image_size(i)
    oh, ow = ds.size
    m = affine_matrix((h, w), (oh, ow), params)
    slots = assign_slots(rec.lanes, rec.h_samples, w, h)
    if params is not None and params.flip:
        slots = mirror_slots(slots)
    mask = sample["mask"].numpy()
    total = own = anylane = 0
    for s, lane in zip(slots, rec.lanes):
        if s < 0:
            continue
        for run in lane_runs(lane, rec.h_samples):
            for x, y in np.round(apply_affine(m, run)).astype(int):
                if 0 <= x < ow and 0 <= y < oh:
                    # a row of slack: strokes end flat at a lane's last point, and this test's
                    # matrix differs from the dataset's exact crop matrix by a fraction of a pixel
                    near = mask[max(0, y - 1):y + 2, x]
                    total += 1
                    own += bool((near == s + 1).any())
                    anylane += bool((near > 0).any())
    return total, own, anylane


def test_real_frames_masks_follow_the_lanes(real_root):
    ds = TuSimpleDataset(real_root, "train", val_fraction=0.0)
    assert len(ds) == 10
    for i in range(len(ds)):
        assert ds.image_size(i) == (720, 1280)
        s = ds[i]
        assert s["image"].shape == (3, 288, 800) and s["image"].dtype == torch.float32
        assert s["mask"].shape == (288, 800) and s["mask"].dtype == torch.int64
        assert s["exist"].shape == (4,) and s["index"] == i
        total, own, anylane = lane_hits(ds, i, s)
        assert total > 50 and anylane == total and own >= 0.95 * total
        present = {int(v) for v in np.unique(s["mask"].numpy())} - {0}
        assert s["exist"].tolist() == [float(k in present) for k in (1, 2, 3, 4)]


def test_real_frame_image_is_resized_normalised_rgb(real_root):
    ds = TuSimpleDataset(real_root, "train", val_fraction=0.0)
    bgr = cv2.imread(str(real_root / ds.records[0].raw_file))
    small = cv2.resize(bgr, (800, 288), interpolation=cv2.INTER_LINEAR)[..., ::-1] / 255.0
    want = (small - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    got = ds[0]["image"].permute(1, 2, 0).numpy()
    # the loader decodes with replicated chroma (simplejpeg fastupsample): within a few
    # levels of OpenCV's decode at edges, 0.1 level on average; a shifted or unnormalised
    # image differs by tens of levels
    level = 1 / (255 * 0.229)
    diff = np.abs(got - want)
    assert diff.mean() < 0.2 * level and diff.max() < 8 * level, (diff.mean() / level, diff.max() / level)


def test_real_frames_at_their_own_512x288_size(tmp_path):
    """Labels in the image's own pixels work for any frame size (here the 0.4 downscale)."""
    shutil.copytree(REAL_FRAMES / "clips", tmp_path / "clips")
    with open(REAL_FRAMES / "labels.json") as src, open(tmp_path / "label_data_small.json", "w") as dst:
        for line in src:
            obj = json.loads(line)
            obj["h_samples"] = [int(round(y * 0.4)) for y in obj["h_samples"]]
            obj["lanes"] = [[int(round(x * 0.4)) if x >= 0 else -2 for x in ln] for ln in obj["lanes"]]
            dst.write(json.dumps(obj) + "\n")
    ds = TuSimpleDataset(tmp_path, "train", size=(144, 400), val_fraction=0.0)
    for i in range(len(ds)):
        assert ds.image_size(i) == (288, 512)
        total, own, anylane = lane_hits(ds, i, ds[i])
        assert total > 30 and anylane == total and own >= 0.9 * total


def test_synthetic_frames_use_the_160_row_convention(synth_root):
    ds = TuSimpleDataset(synth_root, "test")
    assert ds.records[0].h_samples[0] == 80 and ds.records[0].h_samples[-1] == 355  # 360 px high
    for i in range(len(ds)):
        total, own, anylane = lane_hits(ds, i, ds[i])
        assert total > 20 and anylane == total and own >= 0.95 * total


def test_augmented_masks_follow_the_warped_lanes(real_root):
    ds = TuSimpleDataset(real_root, "train", augment=True, seed=7, val_fraction=0.0)
    ds.set_epoch(3)
    flips = 0
    for i in range(len(ds)):
        params = sample_params(frame_rng(7, 3, i), ds.augment_config)
        flips += params.flip
        total, own, anylane = lane_hits(ds, i, ds[i], params)
        assert total > 30 and anylane == total and own >= 0.95 * total
    assert 0 < flips < len(ds)  # both branches exercised


def test_augmentation_is_deterministic_per_seed_epoch_index(real_root):
    ds = TuSimpleDataset(real_root, "train", augment=True, seed=1, val_fraction=0.0)
    a, b = ds[(2, 4)], ds[(2, 4)]
    assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
    ds.set_epoch(2)
    assert torch.equal(ds[4]["image"], a["image"])
    assert not torch.equal(ds[(3, 4)]["image"], a["image"])
    other = TuSimpleDataset(real_root, "train", augment=True, seed=2, val_fraction=0.0)
    assert not torch.equal(other[(2, 4)]["image"], a["image"])


def test_horizontal_flip_mirrors_image_and_swaps_slots(real_root):
    flip_only = AugmentConfig(scale=(1.0, 1.0), max_rotate_deg=0, flip_p=1.0, brightness=0,
                              contrast=0, saturation=0)
    plain = TuSimpleDataset(real_root, "train", val_fraction=0.0)
    flipped = TuSimpleDataset(real_root, "train", augment=True, augment_config=flip_only,
                              val_fraction=0.0)
    for i in (0, 5):
        a, b = plain[i], flipped[i]
        assert torch.allclose(b["image"], a["image"].flip(-1), atol=0.05)
        swap = torch.tensor([0, 4, 3, 2, 1])
        mirrored = swap[a["mask"].flip(-1)]
        assert (mirrored == b["mask"]).float().mean() > 0.995
        assert b["exist"].tolist() == a["exist"].flip(0).tolist()


def test_val_split_is_a_stable_disjoint_holdout(real_root):
    train = TuSimpleDataset(real_root, "train", val_fraction=0.3)
    val = TuSimpleDataset(real_root, "val", val_fraction=0.3)
    names_t = {r.raw_file for r in train.records}
    names_v = {r.raw_file for r in val.records}
    assert len(names_v) == 3 and not names_t & names_v and len(names_t | names_v) == 10
    again = TuSimpleDataset(real_root, "val", val_fraction=0.3, seed=99)
    assert {r.raw_file for r in again.records} == names_v


def test_val_label_file_takes_precedence(tmp_path):
    root = make_root(tmp_path, {"label_data_a.json": [frame("clips/a/1/20.jpg"), frame("clips/a/2/20.jpg")],
                                "val_label.json": [frame("clips/a/3/20.jpg")]})
    ds = TuSimpleDataset(root, "val")
    assert [r.raw_file for r in ds.records] == ["clips/a/3/20.jpg"]
    assert len(TuSimpleDataset(root, "train")) == 2


def test_empty_split_is_a_clear_error(tmp_path):
    root = make_root(tmp_path, {"label_data_a.json": [frame("clips/a/1/20.jpg")]})
    with pytest.raises(ValueError, match=r"split 'test' of .* has no frames \(looked for test_label.json\)"):
        TuSimpleDataset(root, "test")


@pytest.mark.parametrize("kwargs, message", [
    ({"split": "dev"}, "split must be one of train, val, test; got 'dev'"),
    ({"size": (288,)}, "size must be (height, width) positive integers; got (288,)"),
    ({"val_fraction": 1.5}, "val_fraction must be in [0, 1); got 1.5"),
])
def test_bad_dataset_arguments(tmp_path, kwargs, message):
    root = make_root(tmp_path, {"label_data_a.json": [frame("clips/a/1/20.jpg")]})
    with pytest.raises(ValueError) as info:
        TuSimpleDataset(root, **kwargs)
    assert str(info.value) == message


def test_missing_root_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset root not found"):
        TuSimpleDataset(tmp_path / "nope")


def test_invalid_label_raises_with_file_and_line_unless_skipped(tmp_path):
    label = tmp_path / "label_data_a.json"
    make_root(tmp_path, {label.name: [frame("clips/a/1/20.jpg"), frame("clips/a/2/20.jpg", lanes=[[1]])]})
    with pytest.raises(LabelError, match=f"^{label}:2: lane 1 has 1 x values but h_samples has 3$"):
        TuSimpleDataset(tmp_path)
    with pytest.warns(UserWarning, match="skipped 1 invalid"):
        ds = TuSimpleDataset(tmp_path, skip_invalid=True)
    assert len(ds) == 1 and [p.line for p in ds.problems] == [2]


def test_missing_image_at_load_names_label_line(tmp_path):
    label = tmp_path / "label_data_a.json"
    make_root(tmp_path, {label.name: [frame("clips/a/1/20.jpg")]})
    ds = TuSimpleDataset(tmp_path)
    with pytest.raises(LabelError, match=f"^{label}:1: image not found: "):
        ds[0]


def test_read_image_size_from_headers(tmp_path):
    img = np.zeros((37, 53, 3), np.uint8)
    for ext in (".jpg", ".png"):
        cv2.imwrite(str(tmp_path / f"a{ext}"), img)
        assert read_image_size(tmp_path / f"a{ext}") == (37, 53)
    (tmp_path / "b.jpg").write_bytes(b"nope")
    assert read_image_size(tmp_path / "b.jpg") is None



def test_half_resolution_decode_keeps_masks_aligned(real_root):
    """max_upscale=1.25 decodes 1280x720 at 640x360 (DCT scaling); geometry must not move."""
    fast = TuSimpleDataset(real_root, "train", val_fraction=0.0, max_upscale=1.25)
    full = TuSimpleDataset(real_root, "train", val_fraction=0.0)
    for i in (0, 3):
        a, b = fast[i], full[i]
        assert torch.equal(a["mask"], b["mask"]) and torch.equal(a["exist"], b["exist"])
        assert (a["image"] - b["image"]).abs().mean() < 0.1  # softer, not shifted
        total, own, anylane = lane_hits(fast, i, a)
        assert anylane == total and own >= 0.95 * total
    with pytest.raises(ValueError, match=r"max_upscale must be in \[1, 2\]; got 0.5"):
        TuSimpleDataset(real_root, "train", max_upscale=0.5)


def test_decoders_agree(real_root, monkeypatch):
    """simplejpeg (when installed) and OpenCV give the same frame."""
    import lanenb_trainer.data.tusimple as tus

    ds = TuSimpleDataset(real_root, "train", val_fraction=0.0)
    a = ds[1]["image"]
    monkeypatch.setattr(tus, "_simplejpeg", None)
    b = ds[1]["image"]
    assert (a - b).abs().max() < 0.1


def test_uint8_output_normalises_to_the_float_output(synth_root):
    """The trainer's uint8 path plus normalize_images must give what the float path gives."""
    from lanenb_trainer.data.augment import normalize_images

    kw = dict(size=(144, 400), augment=True, seed=5, val_fraction=0.0)
    ds_u8 = TuSimpleDataset(synth_root, "train", normalize=False, **kw)
    ds_f = TuSimpleDataset(synth_root, "train", **kw)
    for i in range(3):
        a, b = ds_u8[(1, i)], ds_f[(1, i)]
        assert a["image"].dtype == torch.uint8 and a["image"].shape == (3, 144, 400)
        assert a["mask"].dtype == torch.uint8 and torch.equal(a["mask"].long(), b["mask"])
        assert torch.equal(a["exist"], b["exist"])
        mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1) * 255
        std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1) * 255
        pix = b["image"] * std + mean            # the float path's jittered pixel values
        inside = (pix > 0.5) & (pix < 254.5)
        norm = normalize_images(a["image"][None])[0]
        # uint8 rounds after the jitter (within one grey level) and saturates out-of-range values
        assert inside.float().mean() > 0.5
        assert ((norm - b["image"]).abs() * std)[inside].max() <= 1.0
        assert (a["image"][pix >= 255] == 255).all() and (a["image"][pix <= 0] == 0).all()


def test_normalize_images_refuses_float_batches():
    from lanenb_trainer.data.augment import normalize_images

    with pytest.raises(TypeError, match=r"expects a uint8 batch, got torch\.float32"):
        normalize_images(torch.zeros(1, 3, 8, 8))


@pytest.mark.parametrize("seed", range(6))
def test_unrotated_frames_take_crop_resize_that_matches_the_warp(seed):
    """The cheap crop + resize path must give the warp's picture, and its own exact lane matrix."""
    from lanenb_trainer.data.augment import AugmentParams, crop_resize_window

    rng = np.random.default_rng(seed)
    h, w, oh, ow = 720, 1280, 288, 800
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.dstack([(xx * 0.2) % 255, (yy * 0.3) % 255, ((xx + yy) * 0.1) % 255]).astype(np.uint8)
    s = float(rng.uniform(1.0, 1.15))
    params = AugmentParams(scale=s, shift_x=float(rng.uniform(-(s - 1) / 2, (s - 1) / 2)),
                           shift_y=float(rng.uniform(-(s - 1) / 2, (s - 1) / 2)), flip=bool(seed % 2))
    m = affine_matrix((h, w), (oh, ow), params)
    (x0, y0, x1, y1), eff = crop_resize_window(m, (h, w), (oh, ow))
    fast = cv2.resize(img[y0:y1, x0:x1], (ow, oh), interpolation=cv2.INTER_LINEAR)
    if params.flip:
        fast = cv2.flip(fast, 1)
    exact = cv2.warpAffine(img, eff, (ow, oh), flags=cv2.INTER_LINEAR)
    diff = np.abs(fast.astype(int) - exact.astype(int))[2:-2, 2:-2]
    assert diff.mean() < 1.0
    pts = np.array([[0.0, 0.0], [w - 1.0, h - 1.0], [300.5, 400.25]])
    # the rounded window moves the picture by less than one output pixel
    assert np.abs(apply_affine(eff, pts) - apply_affine(m, pts)).max() < 1.0
    rotated = affine_matrix((h, w), (oh, ow), AugmentParams(angle_deg=2.0))
    assert crop_resize_window(rotated, (h, w), (oh, ow)) is None


def test_decode_buffer_is_reused_off_alignment_and_per_thread(real_root):
    """The frame is decoded into one reusable buffer per thread that libjpeg-turbo cannot
    write with cache-bypassing stores (not 32-byte aligned); reuse never leaks one frame into
    another, threads do not share it, and a pickled copy (a loader worker) gets its own."""
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    ds = TuSimpleDataset(real_root, "train", val_fraction=0.0, augment=True, seed=3)
    data = ds.image_path(0).read_bytes()
    first, again = ds._frame_buffer(data), ds._frame_buffer(data)
    assert first.ctypes.data == again.ctypes.data and first.ctypes.data % 32 != 0
    assert first.size == 1280 * 720 * 4

    items = [(e, i) for e in range(2) for i in range(len(ds))]
    want = {item: ds[item]["image"].clone() for item in items}
    assert torch.equal(ds[items[0]]["image"], want[items[0]])  # after every other frame
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda item: (item, ds[item]["image"]), items * 3))
    assert all(torch.equal(img, want[item]) for item, img in got)

    copy = pickle.loads(pickle.dumps(ds))
    assert torch.equal(copy[items[1]]["image"], want[items[1]])
    assert copy._frame_buffer(data).ctypes.data != first.ctypes.data
