"""Synthetic scenes: real layout, valid labels, byte-identical per seed, safe output directory."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from lanenb_trainer.data.check import check_dataset
from lanenb_trainer.data.labels import read_label_file
from lanenb_trainer.data.synth import MARKER, _labels, _scene, synth_h_samples, synthesize


def digest(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_layout_and_labels_are_valid(synth_root):
    assert (synth_root / "label_data_synth.json").is_file()
    assert (synth_root / "test_label.json").is_file()
    assert check_dataset(synth_root) == []
    train = read_label_file(synth_root / "label_data_synth.json")
    test = read_label_file(synth_root / "test_label.json")
    assert (len(train), len(test)) == (10, 2)  # 12 frames, test_fraction 0.2
    assert train[0].raw_file == "clips/synth/000000/20.jpg"
    assert train[0].h_samples == synth_h_samples(360)
    assert all(2 <= len(r.lanes) <= 5 for r in train + test)


def test_default_size_uses_the_official_rows(tmp_path):
    summary = synthesize(tmp_path / "d", 2, seed=0, progress=False)
    assert summary["width"] == 1280 and summary["height"] == 720
    rec = read_label_file(tmp_path / "d" / "label_data_synth.json")[0]
    assert rec.h_samples == list(range(160, 711, 10))
    assert check_dataset(tmp_path / "d") == []


def test_same_seed_gives_byte_identical_files(tmp_path):
    a = synthesize(tmp_path / "a", 3, seed=5, width=320, height=180, progress=False)
    synthesize(tmp_path / "b", 3, seed=5, width=320, height=180, progress=False)
    synthesize(tmp_path / "c", 3, seed=6, width=320, height=180, progress=False)
    assert a["train"] + a["test"] == 3
    da, db, dc = digest(tmp_path / "a"), digest(tmp_path / "b"), digest(tmp_path / "c")
    assert da == db
    assert da["clips/synth/000000/20.jpg"] != dc["clips/synth/000000/20.jpg"]


def test_scene_variety_over_many_frames():
    counts, curved, dashed, night, cars = set(), 0, 0, 0, 0
    for i in range(200):
        sc = _scene(np.random.default_rng([0, i]), 1280, 720)
        counts.add(len(sc["lines"]))
        curved += sc["curv"] != 0
        dashed += any(ln.dashed for ln in sc["lines"])
        night += sc["night"]
        cars += sc["cars"] > 0
        lanes = _labels(sc, 1280, synth_h_samples(720))
        for lane in lanes:
            assert all(x == -2 or 0 <= x < 1280 for x in lane)
    assert counts == {2, 3, 4, 5}
    assert all(20 < k < 180 for k in (curved, dashed, night, cars))


def test_refuses_a_non_empty_foreign_directory(tmp_path):
    (tmp_path / "mine.txt").write_text("precious")
    with pytest.raises(FileExistsError) as info:
        synthesize(tmp_path, 2, progress=False)
    assert str(info.value) == (
        f"refusing to write into {tmp_path}: it is not empty and not a previous `lanenb data synth` "
        f"output (no {MARKER}); choose an empty or new directory")
    assert (tmp_path / "mine.txt").read_text() == "precious"


def test_rewrites_its_own_previous_output(tmp_path):
    synthesize(tmp_path / "d", 4, seed=1, width=320, height=180, progress=False)
    synthesize(tmp_path / "d", 2, seed=1, width=320, height=180, progress=False)
    frames = sorted(p.parent.name for p in (tmp_path / "d").rglob("*.jpg"))
    assert frames == ["000000", "000001"]  # no stale frames from the larger run
    assert json.loads((tmp_path / "d" / MARKER).read_text())["frames"] == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"frames": 0}, "frames must be a positive integer; got 0"),
    ({"frames": 2, "width": 64}, "width and height must be >= 128 pixels; got 64x720"),
    ({"frames": 2, "test_fraction": 1.0}, "test_fraction must be in [0, 1); got 1.0"),
])
def test_bad_synth_arguments(tmp_path, kwargs, message):
    with pytest.raises(ValueError) as info:
        synthesize(tmp_path / "d", progress=False, **kwargs)
    assert str(info.value) == message


def test_every_lane_of_a_four_lane_scene_gets_an_scnn_slot():
    """SCNN has two slots per side: a synthetic frame must not hold a lane no model can learn."""
    from lanenb_trainer.data.masks import assign_slots

    hs = synth_h_samples(720)
    dropped = 0
    for i in range(200):
        lanes = _labels(_scene(np.random.default_rng([3, i]), 1280, 720), 1280, hs)
        slots = assign_slots(lanes, hs, 1280, 720)
        missing = sum(s < 0 for s in slots)
        if len(lanes) <= 4:
            dropped += missing
        else:  # five lines: at most one beyond the slots, forgiven by the >4-lane rule
            assert missing <= 1, (i, slots)
    assert dropped == 0
