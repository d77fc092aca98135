"""``lanenb data check|synth|preview`` end to end (in-process argv and one real subprocess)."""

from __future__ import annotations

import subprocess
import sys

import cv2
import pytest
from data_support import frame, make_root

from lanenb.cli import main


def test_check_valid_dataset_exits_0(real_root, capsys):
    assert main(["data", "check", str(real_root), "--quiet"]) == 0
    assert capsys.readouterr().out == ""


def test_check_prints_one_line_per_problem_and_exits_1(tmp_path, capsys):
    label = tmp_path / "label_data_x.json"
    make_root(tmp_path, {label.name: [frame("clips/a/1/20.jpg"), "{bad json",
                                      frame("clips/a/2/20.jpg", h_samples=[240, 240, 250])]},
              {"clips/a/1/20.jpg": (720, 1280), "clips/a/2/20.jpg": (720, 1280)})
    assert main(["data", "check", str(tmp_path), "--quiet"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert out[0].startswith(f"{label}:2: malformed JSON: ")
    assert out[1] == f"{label}:3: duplicate h_sample 240 at index 1"


def test_synth_then_check_then_preview_as_a_user_would(tmp_path):
    out = tmp_path / "synth"
    run = lambda *a: subprocess.run([sys.executable, "-m", "lanenb", "data", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=300)
    r = run("synth", "--out", str(out), "--frames", "5", "--seed", "2", "--width", "320",
            "--height", "180", "--quiet")
    assert r.returncode == 0, r.stderr
    assert '"frames": 5' in r.stdout
    r = run("check", str(out))
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    png = tmp_path / "grid.png"
    r = run("preview", str(out), "--out", str(png), "--n", "4")
    assert r.returncode == 0, r.stderr
    grid = cv2.imread(str(png))
    assert grid is not None and grid.shape[1] == 2 * 480


def test_synth_refuses_foreign_directory(tmp_path, capsys):
    (tmp_path / "x.txt").write_text("x")
    assert main(["data", "synth", "--out", str(tmp_path), "--frames", "2", "--quiet"]) == 2
    assert "refusing to write into" in capsys.readouterr().err


def test_preview_rejects_non_png_and_empty_split(tmp_path, capsys):
    make_root(tmp_path, {"label_data_x.json": [frame("clips/a/1/20.jpg")]}, {"clips/a/1/20.jpg": (72, 128)})
    assert main(["data", "preview", str(tmp_path), "--out", str(tmp_path / "g.jpg")]) == 2
    assert "--out must end in .png; got" in capsys.readouterr().err
    assert main(["data", "preview", str(tmp_path), "--out", str(tmp_path / "g.png"),
                 "--split", "test"]) == 2
    assert "split 'test'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["data"], ["data", "synth"]])
def test_usage_errors(argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2


def test_preview_draws_predictions_over_ground_truth(synth_root, tmp_path, capsys):
    import json

    from lanenb_trainer.data.labels import read_label_file

    gt = read_label_file(synth_root / "test_label.json")
    pred = tmp_path / "pred.json"
    # predictions shifted 40 px right of the truth, so coloured pixels appear where GT is not
    pred.write_text("".join(json.dumps({"raw_file": r.raw_file, "run_time": 1,
                                        "lanes": [[x + 40 if x >= 0 else x for x in lane] for lane in r.lanes]})
                            + "\n" for r in gt))
    out_plain, out_pred = tmp_path / "gt.png", tmp_path / "pred.png"
    assert main(["data", "preview", str(synth_root), "--split", "test", "--out", str(out_plain)]) == 0
    assert main(["data", "preview", str(synth_root), "--split", "test", "--pred", str(pred),
                 "--out", str(out_pred)]) == 0
    a, b = cv2.imread(str(out_plain)), cv2.imread(str(out_pred))
    assert a.shape == b.shape and (a != b).any()

    bad = tmp_path / "bad.json"
    bad.write_text('{"raw_file": "clips/x/1.jpg"}\n')
    assert main(["data", "preview", str(synth_root), "--pred", str(bad), "--out", str(out_pred)]) == 2
    assert f"{bad}:1: a prediction needs a 'raw_file' string and a 'lanes' list" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text('{"raw_file": "clips/none/1.jpg", "lanes": []}\n')
    assert main(["data", "preview", str(synth_root), "--pred", str(other), "--out", str(out_pred)]) == 2
    assert "no frame of split 'train'" in capsys.readouterr().err
