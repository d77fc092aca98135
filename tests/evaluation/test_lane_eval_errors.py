"""Bad prediction / ground-truth files fail with the official tool's cases, but with a
message naming the file, line and frame."""

from __future__ import annotations

import re

import pytest

from lanenb_trainer.evaluation import EvalError, evaluate, evaluate_files


@pytest.fixture()
def files(tmp_path, real_gt, write_jsonl):
    """Ten real frames as gt and a valid prediction file for them; returns a writer."""
    gt = real_gt[:10]
    gt_path = write_jsonl(tmp_path / "gt.json", gt)
    preds = [{"raw_file": r["raw_file"], "lanes": r["lanes"], "run_time": 12.5} for r in gt]

    def make(pred_records=None, text=None):
        path = tmp_path / "pred.json"
        if text is not None:
            path.write_text(text, encoding="utf-8")
        else:
            write_jsonl(path, preds if pred_records is None else pred_records)
        return path, gt_path

    make.preds = preds
    make.gt = gt
    return make


def err(pred_path, gt_path) -> str:
    with pytest.raises(EvalError) as info:
        evaluate_files(pred_path, gt_path)
    return str(info.value)


def test_valid_file_scores(files):
    res = evaluate_files(*files())
    assert (res.accuracy, res.fp, res.fn) == (1.0, 0.0, 0.0)


def test_eval_error_is_a_value_error():
    assert issubclass(EvalError, ValueError)


def test_missing_prediction_file(files, tmp_path):
    _, gt = files()
    msg = err(tmp_path / "nope.json", gt)
    assert msg == f"prediction file not found: {tmp_path / 'nope.json'}"


def test_prediction_file_not_json_lines(files):
    pred, gt = files(text='{"raw_file": "a", "lanes": [], "run_time": 1}\nthis is not json\n')
    msg = err(pred, gt)
    assert msg.startswith(f"{pred}:2: prediction file is not JSON lines (one JSON object per line)")


def test_prediction_file_that_is_one_json_array(files):
    import json

    pred, gt = files(text=json.dumps(files.preds) + "\n")
    assert err(pred, gt) == (
        f"{pred}:1: prediction file is not JSON lines: expected one JSON object per line, got a JSON array"
    )


def test_empty_prediction_file(files):
    pred, gt = files(text="\n\n")
    assert err(pred, gt) == f"prediction file {pred} is empty: expected one JSON object per frame"


def test_prediction_file_not_utf8(files):
    pred, gt = files()
    pred.write_bytes(b"\xff\xfe\x00garbage")
    assert err(pred, gt).startswith(f"prediction file {pred} is not UTF-8 text")


def test_not_all_test_frames_predicted(files):
    dropped = [files.preds[3], files.preds[6], files.preds[8]]
    keep = [p for p in files.preds if p not in dropped]
    pred, gt = files(keep)
    msg = err(pred, gt)
    m = re.fullmatch(
        rf"{re.escape(str(pred))}: predictions are missing for 3 of 10 test frames, e\.g\. '([^']+)': "
        rf"the prediction file needs one line per frame of {re.escape(str(gt))}",
        msg,
    )
    assert m, msg
    assert m.group(1) == dropped[0]["raw_file"]


def test_unknown_raw_file(files):
    preds = list(files.preds)
    preds[4] = dict(preds[4], raw_file="clips/0313-9/1/20.jpg")
    pred, gt = files(preds)
    assert err(pred, gt) == (
        f"{pred}:5: raw_file 'clips/0313-9/1/20.jpg' is not a frame of the test set {gt} "
        "(predictions must use the ground truth's raw_file paths)"
    )


@pytest.mark.parametrize("key", ["lanes", "run_time"])
def test_missing_key_names_key_line_and_frame(files, key):
    preds = list(files.preds)
    preds[2] = {k: v for k, v in preds[2].items() if k != key}
    pred, gt = files(preds)
    raw = files.preds[2]["raw_file"]
    assert err(pred, gt) == (
        f"{pred}:3: prediction (frame {raw!r}) is missing {key!r}: each line needs raw_file, lanes and run_time"
    )


def test_missing_raw_file(files):
    preds = list(files.preds)
    preds[0] = {"lanes": [], "run_time": 1}
    pred, gt = files(preds)
    assert err(pred, gt) == (
        f"{pred}:1: prediction is missing 'raw_file': each line needs raw_file, lanes and run_time"
    )


def test_wrong_lane_length(files):
    preds = list(files.preds)
    lanes = [list(l) for l in preds[1]["lanes"]]
    lanes[1] = lanes[1][:-1]
    preds[1] = dict(preds[1], lanes=lanes)
    pred, gt = files(preds)
    raw = preds[1]["raw_file"]
    assert err(pred, gt) == (
        f"{pred}:2: frame {raw!r}: lane 1 has 47 points but the ground truth has 48 h_samples "
        "(one x per h_sample, -2 where the lane is not visible)"
    )


def test_wrong_lane_length_is_an_error_even_when_run_time_is_over_200(files):
    preds = list(files.preds)
    preds[0] = dict(preds[0], lanes=[[1, 2, 3]], run_time=999)
    pred, gt = files(preds)
    assert "lane 0 has 3 points but the ground truth has 48 h_samples" in err(pred, gt)


def test_lanes_not_an_array(files):
    preds = list(files.preds)
    preds[0] = dict(preds[0], lanes={"a": 1})
    pred, gt = files(preds)
    raw = preds[0]["raw_file"]
    assert err(pred, gt) == (
        f"{pred}:1: frame {raw!r}: 'lanes' must be an array of lanes (arrays of x per h_sample), got a JSON object"
    )


def test_lane_not_an_array(files):
    preds = list(files.preds)
    preds[0] = dict(preds[0], lanes=[5])
    pred, gt = files(preds)
    assert err(pred, gt).endswith("lane 0 must be an array of x per h_sample, got a JSON number")


@pytest.mark.parametrize("bad, shown", [("abc", "'abc' (string)"), (None, "None (null)"), ([1], "[1] (array)")])
def test_non_numeric_x(files, bad, shown):
    preds = list(files.preds)
    lanes = [list(l) for l in preds[7]["lanes"]]
    lanes[2][5] = bad
    preds[7] = dict(preds[7], lanes=lanes)
    pred, gt = files(preds)
    raw = preds[7]["raw_file"]
    assert err(pred, gt) == (
        f"{pred}:8: frame {raw!r}: lane 2 point 5 is {shown}; "
        "expected a number (x in pixels, negative where the lane is not visible)"
    )


@pytest.mark.parametrize("bad", ["12", None, True])
def test_run_time_not_a_number(files, bad):
    preds = list(files.preds)
    preds[3] = dict(preds[3], run_time=bad)
    pred, gt = files(preds)
    raw = preds[3]["raw_file"]
    assert err(pred, gt) == f"{pred}:4: frame {raw!r}: 'run_time' must be a number of milliseconds, got {bad!r}"


def test_duplicate_prediction(files):
    preds = list(files.preds)
    preds[9] = dict(preds[0])
    pred, gt = files(preds)
    raw = preds[0]["raw_file"]
    assert err(pred, gt) == f"{pred}:10: second prediction for frame {raw!r} (first at {pred}:1)"


def test_ground_truth_errors(tmp_path, real_gt, write_jsonl):
    gt = real_gt[:3]
    preds = [{"raw_file": r["raw_file"], "lanes": [], "run_time": 1} for r in gt]
    pred_path = write_jsonl(tmp_path / "pred.json", preds)

    dup = write_jsonl(tmp_path / "dup.json", gt + [gt[1]])
    assert err(pred_path, dup) == (
        f"{dup}:4: ground-truth frame {gt[1]['raw_file']!r} appears twice (first at {dup}:2)"
    )
    no_h = write_jsonl(tmp_path / "noh.json", [gt[0], {k: v for k, v in gt[1].items() if k != "h_samples"}])
    assert err(pred_path, no_h) == (
        f"{no_h}:2: ground-truth frame is missing 'h_samples' (each line needs raw_file, lanes, h_samples)"
    )
    short = dict(gt[2], lanes=[gt[2]["lanes"][0][:10]])
    bad_len = write_jsonl(tmp_path / "short.json", [gt[0], gt[1], short])
    assert err(pred_path, bad_len) == (
        f"{bad_len}:3: frame {gt[2]['raw_file']!r}: lane 0 has 10 points but the frame has 48 h_samples "
        "(one x per h_sample, -2 where the lane is not visible)"
    )
    bad_h = write_jsonl(tmp_path / "badh.json", [dict(gt[0], h_samples=[])])
    assert err(pred_path, bad_h) == (
        f"{bad_h}:1: frame {gt[0]['raw_file']!r}: 'h_samples' must be a non-empty array of row numbers"
    )
    assert err(pred_path, tmp_path / "missing_gt.json") == (
        f"ground-truth file not found: {tmp_path / 'missing_gt.json'}"
    )


def test_in_memory_records_are_named_by_position(real_gt):
    gt = real_gt[:2]
    preds = [{"raw_file": r["raw_file"], "lanes": r["lanes"], "run_time": 1} for r in gt]
    preds[1] = dict(preds[1], lanes=[[0]])
    with pytest.raises(EvalError, match=r"^<predictions>:2: frame 'clips/.*': lane 0 has 1 points"):
        evaluate(preds, gt)
    with pytest.raises(EvalError, match=r"^<predictions>:1: expected a frame dict, got str"):
        evaluate(["clips/a.jpg"], gt)
    with pytest.raises(EvalError, match=r"^predictions must be a list of frame dicts, got str"):
        evaluate("pred.json", gt)
