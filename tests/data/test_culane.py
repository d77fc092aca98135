"""CULane reader: list files, ``.lines.txt`` labels, slots from the existence flags, and the
same items as ``TuSimpleDataset``; ``check_culane`` names FILE:LINE."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from data_support import write_jpeg

from lanenb_trainer.data.culane import CULaneDataset, check_culane, is_culane_root, parse_lines, read_list, to_record
from lanenb_trainer.data.labels import LabelError

# three lanes (left to right at the bottom) and one far-right lane, in CULane's format
LEFT = [(500 - 2.5 * k, 590 - 10 * k) for k in range(0, 30)]
EGO_L = [(700 - 1.0 * k, 590 - 10 * k) for k in range(0, 30)]
EGO_R = [(1000 + 1.0 * k, 590 - 10 * k) for k in range(0, 30)]
RIGHT = [(1300 + 2.5 * k, 590 - 10 * k) for k in range(0, 30)]


def lines_text(*lanes) -> str:
    return "".join(" ".join(f"{x:.3f} {y}" for x, y in lane) + " \n" for lane in lanes)


def make_culane(root: Path) -> Path:
    """Two training frames, one val, one test, in the official layout (small 1640x590 JPEGs)."""
    frames = {
        "driver_23_30frame/05151649_0422.MP4/00000": (lines_text(EGO_R, LEFT, EGO_L), "1 1 1 0"),
        "driver_23_30frame/05151649_0422.MP4/00030": (lines_text(EGO_L, EGO_R, RIGHT), "0 1 1 1"),
        "driver_23_30frame/05151649_0422.MP4/00060": (lines_text(EGO_L, EGO_R), "0 1 1 0"),
        "driver_37_30frame/05181432_0203.MP4/00000": (lines_text(LEFT, EGO_L, EGO_R, RIGHT), None),
    }
    for stem, (text, _) in frames.items():
        write_jpeg(root / f"{stem}.jpg", 590, 1640)
        (root / f"{stem}.lines.txt").write_text(text)
    (root / "list").mkdir(parents=True)
    names = list(frames)
    gt = lambda stem: f"/{stem}.jpg /laneseg_label_w16/{stem}.png {frames[stem][1]}\n"  # noqa: E731
    (root / "list" / "train_gt.txt").write_text(gt(names[0]) + gt(names[1]))
    (root / "list" / "val_gt.txt").write_text(gt(names[2]))
    (root / "list" / "test.txt").write_text(f"/{names[3]}.jpg\n")
    return root


@pytest.fixture
def culane(tmp_path) -> Path:
    return make_culane(tmp_path / "CULane")


def slots_in(mask) -> list[int]:
    return sorted(int(v) for v in np.unique(mask.numpy()) if v)


def test_culane_items_are_tusimple_items_with_slots_from_the_flags(culane):
    ds = CULaneDataset(culane, "train", size=(288, 800))
    assert len(ds) == 2 and is_culane_root(culane)
    first, second = ds[0], ds[1]
    assert set(first) == {"image", "mask", "exist", "index"}
    assert tuple(first["image"].shape) == (3, 288, 800) and tuple(first["mask"].shape) == (288, 800)
    assert first["exist"].tolist() == [1, 1, 1, 0] and slots_in(first["mask"]) == [1, 2, 3]
    assert second["exist"].tolist() == [0, 1, 1, 1] and slots_in(second["mask"]) == [2, 3, 4]
    # lanes listed out of order still land left to right: slot 1 is the leftmost lane's pixels
    mask = first["mask"].numpy()
    assert mask[287, : 800 * 520 // 1640].max() == 1


def test_the_test_split_has_no_flags_and_uses_the_geometric_slot_rule(culane):
    item = CULaneDataset(culane, "test", size=(288, 800))[0]
    assert item["exist"].tolist() == [1, 1, 1, 1]


def test_val_reads_val_gt_and_a_missing_split_is_named(culane, tmp_path):
    assert len(CULaneDataset(culane, "val")) == 1
    (culane / "list" / "val_gt.txt").unlink()
    with pytest.raises(ValueError,
                       match=r"split 'val' of .* has no list file \(looked for list/val_gt\.txt, list/val\.txt\)"):
        CULaneDataset(culane, "val")


def test_culane_points_become_rows_with_minus_two_gaps():
    rec = to_record("a.jpg", [np.array([[10.4, 590], [12.6, 580]]), np.array([[-3.0, 590], [40, 570]])])
    assert rec.h_samples == [570, 580, 590]
    assert rec.lanes == [[-2, 13, 10], [40, -2, -2]]


@pytest.mark.parametrize("text, message", [
    ("1 2 3\n", r"lanes\.lines\.txt:1: odd number of values \(3\)"),
    ("1 2\n1 x\n", r"lanes\.lines\.txt:2: not a number: 'x'"),
])
def test_bad_lines_files_name_file_and_line(text, message):
    with pytest.raises(LabelError, match=message):
        parse_lines(text, "lanes.lines.txt")


def test_check_culane_reports_missing_images_and_labels_by_list_line(culane):
    assert check_culane(culane) == []
    (culane / "driver_23_30frame/05151649_0422.MP4/00030.lines.txt").unlink()
    (culane / "driver_37_30frame/05181432_0203.MP4/00000.jpg").unlink()
    problems = [str(p) for p in check_culane(culane)]
    assert len(problems) == 2
    assert problems[0].endswith("train_gt.txt:2: label file not found: "
                                f"{culane}/driver_23_30frame/05151649_0422.MP4/00030.lines.txt")
    assert "test.txt:1: image not found" in problems[1]


def test_list_lines_with_wrong_fields_are_refused(tmp_path):
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "train_gt.txt").write_text("/a.jpg /a.png 1 1\n")
    with pytest.raises(LabelError, match=r"train_gt\.txt:1: expected '/image\.jpg' or .* got 4 fields"):
        read_list(tmp_path, "list/train_gt.txt")
