"""``lanenb eval``: summary for people, the official triple as the last stdout line,
per-frame scores on request, exit 1 with the evaluator's message on bad input."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from lanenb.cli import main
from lanenb_trainer.evaluation import evaluate_files


@pytest.fixture()
def pair(tmp_path, real_gt, speed_bench, write_jsonl):
    gt = real_gt[:200]
    pred = speed_bench.perturb(gt, random.Random(3))
    return write_jsonl(tmp_path / "pred.json", pred), write_jsonl(tmp_path / "gt.json", gt)


def test_last_line_is_the_official_triple(pair, capsys):
    pred, gt = pair
    assert main(["eval", "--pred", str(pred), "--gt", str(gt)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    expected = evaluate_files(pred, gt)
    assert json.loads(out[-1]) == {"accuracy": expected.accuracy, "fp": expected.fp, "fn": expected.fn}
    assert list(json.loads(out[-1])) == ["accuracy", "fp", "fn"]
    assert out[0] == "frames      200"
    assert f"accuracy    {expected.accuracy * 100:.2f} %" in out
    assert any(line.startswith("penalised   ") for line in out)  # the perturbation has some
    assert "worst 5 frame(s):" in out


def test_per_frame_file(pair, tmp_path, capsys):
    pred, gt = pair
    out_path = tmp_path / "scores" / "frames.json"
    assert main(["eval", "--pred", str(pred), "--gt", str(gt), "--per-frame", str(out_path), "--worst", "0"]) == 0
    out = capsys.readouterr().out
    assert f"per-frame scores: {out_path}" in out
    rows = [json.loads(line) for line in out_path.read_text().splitlines()]
    expected = evaluate_files(pred, gt)
    assert [r["raw_file"] for r in rows] == [f.raw_file for f in expected.frames]
    assert rows == [f.to_dict() for f in expected.frames]
    assert sum(r["accuracy"] for r in rows) / len(rows) == pytest.approx(expected.accuracy, abs=1e-12)
    assert not list(out_path.parent.glob(".*.tmp"))  # atomic write left no temp file


def test_bad_input_exits_1_with_the_message(pair, tmp_path, capsys):
    pred, gt = pair
    lines = pred.read_text().splitlines()
    bad = tmp_path / "bad.json"
    bad.write_text("\n".join(lines[:-1]) + "\n")
    assert main(["eval", "--pred", str(bad), "--gt", str(gt)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        f"lanenb eval: error: {bad}: predictions are missing for 1 of 200 test frames, e.g. "
    )


def test_negative_worst_is_rejected(pair, capsys):
    pred, gt = pair
    assert main(["eval", "--pred", str(pred), "--gt", str(gt), "--worst", "-1"]) == 1
    assert capsys.readouterr().err == "lanenb eval: error: --worst must be >= 0, got -1\n"


def test_console_entry_point_in_a_real_process(pair):
    pred, gt = pair
    proc = subprocess.run(
        [sys.executable, "-m", "lanenb", "eval", "--pred", str(pred), "--gt", str(gt)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    assert last == evaluate_files(pred, gt).summary()
    proc = subprocess.run(
        [sys.executable, "-m", "lanenb", "eval", "--pred", str(gt.parent / "missing.json"), "--gt", str(gt)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 1
    assert f"prediction file not found: {gt.parent / 'missing.json'}" in proc.stderr


def test_unwritable_per_frame_path_is_reported(pair, tmp_path, capsys):
    pred, gt = pair
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    target = blocker / "frames.json"
    assert main(["eval", "--pred", str(pred), "--gt", str(gt), "--per-frame", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"lanenb eval: error: cannot write --per-frame {target}: ")
