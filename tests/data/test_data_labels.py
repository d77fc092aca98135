"""Label parsing and validation: the real official file, and every bad-input case by message."""

from __future__ import annotations

import json
import os

import pytest
from data_support import REAL_LABELS, frame, make_root, write_jpeg

from lanenb_trainer.data.check import check_dataset
from lanenb_trainer.data.labels import LabelError, LaneRecord, Problem, read_label_file


def test_reads_every_line_of_the_real_label_file():
    records = read_label_file(REAL_LABELS)
    assert len(records) == 2858
    first = records[0]
    assert isinstance(first, LaneRecord)
    assert first.raw_file == "clips/0313-1/6040/20.jpg"
    assert first.h_samples == list(range(240, 711, 10))
    assert all(len(lane) == 48 for lane in first.lanes)
    assert first.source == str(REAL_LABELS) and first.line == 1
    assert records[-1].line == 2858
    assert len({r.raw_file for r in records}) == 2858


def test_problem_formats_file_line_message():
    assert str(Problem("a.json", 3, "boom")) == "a.json:3: boom"
    err = LabelError(Problem("a.json", 3, "boom"))
    assert str(err) == "a.json:3: boom" and isinstance(err, ValueError)


def test_valid_dataset_has_no_problems(tmp_path):
    root = make_root(tmp_path, {"label_data_x.json": [frame("clips/a/1/20.jpg")]},
                     {"clips/a/1/20.jpg": (720, 1280)})
    assert check_dataset(root) == []


# (label-file lines, images, expected message fragment, line number)
BAD_LINES = [
    pytest.param(['{"lanes": [[1, 2, 3]], "h_samples": [1, 2'], "malformed JSON: ", 1, id="malformed-json"),
    pytest.param([{"lanes": [[1, 2, 3]], "raw_file": "clips/a/1/20.jpg"}], "missing key 'h_samples'", 1,
                 id="missing-key"),
    pytest.param([frame("clips/a/1/20.jpg", lanes=[[100, 110]])],
                  "lane 1 has 2 x values but h_samples has 3", 1, id="lane-length"),
    pytest.param([frame("clips/a/1/20.jpg", h_samples=[240, 260, 250])],
                  "h_samples not increasing: 250 follows 260 at index 2", 1, id="non-monotonic"),
    pytest.param([frame("clips/a/1/20.jpg", h_samples=[240, 250, 250])],
                  "duplicate h_sample 250 at index 2", 1, id="duplicate-h-sample"),
    pytest.param([frame("clips/a/1/20.jpg", lanes=[[100, 1300, -2]])],
                  "lane 1 x=1300 at y=250 is outside the image (0..1279); use -2 for no point", 1,
                  id="x-beyond-width"),
    pytest.param([frame("clips/a/1/20.jpg", lanes=[[100, -5, -2]])],
                  "lane 1 x=-5 at y=250 is outside the image (0..1279); use -2 for no point", 1,
                  id="x-negative"),
    pytest.param([frame("clips/a/1/20.jpg", h_samples=[240, 250, 720])],
                  "h_sample 720 is outside the image rows (0..719)", 1, id="h-sample-below-image"),
    pytest.param([frame("clips/a/1/20.jpg"), frame("clips/a/1/20.jpg")],
                  "duplicate raw_file 'clips/a/1/20.jpg' (first at {file}:1)", 2, id="duplicate-raw-file"),
    pytest.param([frame("clips/a/1/20.jpg"), "[1, 2, 3]"], "expected a JSON object per line, got list", 2,
                 id="line-not-object"),
    pytest.param([frame("/abs/clips/a/1/20.jpg")],
                  "'raw_file' must be a relative path inside the dataset root, got '/abs/clips/a/1/20.jpg'",
                  1, id="raw-file-absolute"),
    pytest.param([frame("clips/a/1/20.jpg", lanes=[[1.5, 2, 3]])],
                  "'lanes' must be a list of lists of integers", 1, id="lanes-not-ints"),
    pytest.param([frame("clips/a/1/20.jpg", h_samples="240")],
                  "'h_samples' must be a list of integers", 1, id="h-samples-not-list"),
]


@pytest.mark.parametrize("lines, message, lineno", BAD_LINES)
def test_bad_label_lines_reported_by_check_and_reader(tmp_path, lines, message, lineno):
    label = tmp_path / "label_data_x.json"
    root = make_root(tmp_path, {label.name: lines}, {"clips/a/1/20.jpg": (720, 1280)})
    expected = f"{label}:{lineno}: " + message.format(file=label)
    problems = [str(p) for p in check_dataset(root)]
    assert any(p.startswith(expected) for p in problems), problems
    # the reader, checking images too, raises the very same message
    with pytest.raises(LabelError) as info:
        read_label_file(label, check_images=True)
    assert str(info.value).startswith(expected)


def test_x_beyond_width_unknown_without_images(tmp_path):
    label = tmp_path / "label_data_x.json"
    make_root(tmp_path, {label.name: [frame("clips/a/1/20.jpg", lanes=[[100, 1300, -2]])]})
    assert len(read_label_file(label)) == 1  # width unknown: only x >= 0 is checkable


def _one_frame_root(tmp_path):
    label = tmp_path / "label_data_x.json"
    make_root(tmp_path, {label.name: [frame("clips/a/1/20.jpg")]})
    return label, tmp_path / "clips/a/1/20.jpg"


def test_missing_image(tmp_path):
    label, img = _one_frame_root(tmp_path)
    assert [str(p) for p in check_dataset(tmp_path)] == [f"{label}:1: image not found: {img}"]
    with pytest.raises(LabelError, match="image not found"):
        read_label_file(label, check_images=True)


def test_unreadable_image(tmp_path):
    label, img = _one_frame_root(tmp_path)
    img.mkdir(parents=True)  # a directory where the JPEG should be: open() fails
    [problem] = check_dataset(tmp_path)
    assert str(problem).startswith(f"{label}:1: image unreadable: {img} (")


def test_corrupt_image(tmp_path):
    label, img = _one_frame_root(tmp_path)
    img.parent.mkdir(parents=True)
    img.write_bytes(b"this is not a jpeg at all" * 10)
    assert [str(p) for p in check_dataset(tmp_path)] == [
        f"{label}:1: image cannot be decoded (corrupt or not an image): {img}"]


def test_truncated_jpeg(tmp_path):
    label, img = _one_frame_root(tmp_path)
    write_jpeg(img, 720, 1280)
    img.write_bytes(img.read_bytes()[: img.stat().st_size // 2])
    [problem] = check_dataset(tmp_path)
    assert str(problem).startswith(f"{label}:1: image")
    assert "truncated JPEG" in str(problem) or "cannot be decoded" in str(problem)


def test_empty_image_file(tmp_path):
    label, img = _one_frame_root(tmp_path)
    img.parent.mkdir(parents=True)
    img.write_bytes(b"")
    assert [str(p) for p in check_dataset(tmp_path)] == [f"{label}:1: image is empty (0 bytes): {img}"]


def test_empty_label_file(tmp_path):
    (tmp_path / "label_data_x.json").write_text("\n")
    assert [str(p) for p in check_dataset(tmp_path)] == [
        f"{tmp_path / 'label_data_x.json'}:1: empty label file (expected one JSON object per line)"]
    with pytest.raises(LabelError, match="empty label file"):
        read_label_file(tmp_path / "label_data_x.json")


def test_label_file_holding_a_json_array(tmp_path):
    label = tmp_path / "label_data_x.json"
    label.write_text(json.dumps([frame("clips/a/1/20.jpg")], indent=1))
    assert [str(p) for p in check_dataset(tmp_path)] == [
        (f"{label}:1: label file is not JSON lines: it holds one JSON array; "
         "write one JSON object per line")]


def test_label_file_pretty_printed_object(tmp_path):
    label = tmp_path / "label_data_x.json"
    label.write_text(json.dumps(frame("clips/a/1/20.jpg"), indent=2))
    [problem] = check_dataset(tmp_path)
    assert str(problem).startswith(f"{label}:1: label file is not JSON lines: one JSON document "
                                   "spread over")


def test_no_label_files(tmp_path):
    (tmp_path / "clips").mkdir()
    assert [str(p) for p in check_dataset(tmp_path)] == [
        (f"{tmp_path}:0: no label files found (expected label_data*.json, test_label.json or "
         "val_label.json)")]


def test_missing_root(tmp_path):
    assert [str(p) for p in check_dataset(tmp_path / "nope")] == [
        f"{tmp_path / 'nope'}:0: dataset root not found or not a directory"]


def test_duplicate_raw_file_across_train_and_test(tmp_path):
    root = make_root(tmp_path, {"label_data_x.json": [frame("clips/a/1/20.jpg")],
                                "test_label.json": [frame("clips/a/1/20.jpg")]},
                     {"clips/a/1/20.jpg": (720, 1280)})
    assert [str(p) for p in check_dataset(root)] == [
        (f"{root / 'test_label.json'}:1: duplicate raw_file 'clips/a/1/20.jpg' "
         f"(first at {root / 'label_data_x.json'}:1)")]


def test_skip_invalid_keeps_good_frames_and_reports(tmp_path):
    label = tmp_path / "label_data_x.json"
    make_root(tmp_path, {label.name: [frame("clips/a/1/20.jpg"), "{oops",
                                      frame("clips/a/2/20.jpg", lanes=[[1]]),
                                      frame("clips/a/3/20.jpg")]})
    found: list[Problem] = []
    with pytest.warns(UserWarning, match=r"skipped 2 invalid label line\(s\)"):
        records = read_label_file(label, skip_invalid=True, problems=found)
    assert [r.raw_file for r in records] == ["clips/a/1/20.jpg", "clips/a/3/20.jpg"]
    assert [p.line for p in found] == [2, 3]


def test_check_never_modifies_the_dataset(tmp_path):
    root = make_root(tmp_path, {"label_data_x.json": [frame("clips/a/1/20.jpg"), "{bad"]},
                     {"clips/a/1/20.jpg": (720, 1280)})
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in root.rglob("*") if p.is_file()}
    check_dataset(root)
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in root.rglob("*") if p.is_file()}
    assert before == after and os.listdir(root) == os.listdir(root)
