"""The official CULane metric on hand-computable cases, and files in the real CULane layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lanenb_trainer.evaluation import EvalError
from lanenb_trainer.evaluation.culane_eval import _dp_matching, evaluate_culane, interp_lane, lane_ious, match_lanes


def vertical(x: float, y0: int = 100, y1: int = 580, step: int = 10) -> np.ndarray:
    return np.array([(x, y) for y in range(y1, y0 - 1, -step)], dtype=float)


def band_iou(d: float, width: int = 30) -> float:
    """IoU of two parallel vertical bands ``width`` wide, ``d`` apart (caps ignored)."""
    return max(0.0, width - d) / (width + d) if d < width else 0.0


def test_identical_lanes_score_iou_1_and_f1_1():
    lanes = [vertical(400), vertical(800), vertical(1200)]
    assert np.allclose(np.diag(lane_ious(lanes, lanes)), 1.0)
    assert match_lanes(lanes, lanes) == (3, 0, 0)


def test_a_lane_shifted_by_more_than_the_width_does_not_overlap():
    assert lane_ious([vertical(500)], [vertical(531)])[0, 0] == 0.0
    assert match_lanes([vertical(500)], [vertical(531)]) == (0, 1, 1)


@pytest.mark.parametrize("d", [3, 5, 8, 12, 20])
def test_iou_of_parallel_lanes_is_the_band_overlap(d):
    iou = lane_ious([vertical(500)], [vertical(500 + d)])[0, 0]
    assert iou == pytest.approx(band_iou(d), abs=0.03)


def test_the_threshold_is_iou_above_one_half():
    assert match_lanes([vertical(500)], [vertical(505)]) == (1, 0, 0)  # IoU ~0.71
    assert match_lanes([vertical(500)], [vertical(515)]) == (0, 1, 1)  # IoU ~0.33


def test_matching_maximises_total_iou_not_greedy_best_pairs():
    # IoU(A,P)~.82 is the best pair, but taking it leaves B with Q (~.30): one TP. The
    # maximum-weight matching pairs A-Q (~.67) and B-P (~.62): two TPs.
    a, b, p, q = vertical(500), vertical(510), vertical(503), vertical(494)
    ious = lane_ious([a, b], [p, q])
    assert ious[0, 0] > ious[0, 1] > 0.5 and ious[1, 0] > 0.5 > ious[1, 1]
    assert match_lanes([a, b], [p, q]) == (2, 0, 0)


def test_the_subset_dp_finds_the_same_optimum_as_the_hungarian_method():
    from scipy.optimize import linear_sum_assignment

    rng = np.random.default_rng(1)
    for _ in range(100):
        w = rng.uniform(0, 1, (rng.integers(1, 7), rng.integers(1, 7)))
        r, c = linear_sum_assignment(w, maximize=True)
        assert sum(w[i, j] for i, j in _dp_matching(w)) == pytest.approx(w[r, c].sum())


def test_the_spline_passes_through_every_point_and_matches_scipys_natural_spline():
    from scipy.interpolate import CubicSpline

    pts = np.array([[700, 590], [690, 540], [665, 480], [640, 430], [600, 380]], dtype=float)
    out = interp_lane(pts, times=50)
    assert len(out) == 4 * 50 + 1 and np.allclose(out[::50], pts)
    h = np.hypot(*np.diff(pts, axis=0).T)
    t = np.concatenate([[0], np.cumsum(h)])
    tt = np.concatenate([t[j] + h[j] / 50 * np.arange(50) for j in range(4)] + [t[-1:]])
    assert np.allclose(CubicSpline(t, pts, bc_type="natural")(tt), out)


def test_empty_sides_count_all_lanes_as_misses_or_false_alarms():
    assert match_lanes([vertical(400), vertical(800)], []) == (0, 0, 2)
    assert match_lanes([], [vertical(400)]) == (0, 1, 0)


def write_lines(path: Path, lanes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(" ".join(f"{x} {y}" for x, y in lane) + "\n" for lane in lanes))


@pytest.fixture
def culane(tmp_path) -> tuple[Path, Path]:
    root, pred = tmp_path / "CULane", tmp_path / "pred"
    frames = ["driver_37_30frame/05181432_0203.MP4/00000", "driver_37_30frame/05181432_0203.MP4/00030",
              "driver_100_30frame/05251517_0433.MP4/00000"]
    for stem in frames:
        write_lines(root / f"{stem}.lines.txt", [vertical(400), vertical(800), vertical(1200)])
    write_lines(pred / f"{frames[0]}.lines.txt", [vertical(400), vertical(800), vertical(1200)])  # 3 TP
    write_lines(pred / f"{frames[1]}.lines.txt", [vertical(402), vertical(840)])  # 1 TP, 1 FP, 2 FN
    # frames[2]: no prediction file -> 3 FN
    (root / "list" / "test_split").mkdir(parents=True)
    (root / "list" / "test.txt").write_text("".join(f"/{s}.jpg\n" for s in frames))
    (root / "list" / "test_split" / "test0_normal.txt").write_text(f"/{frames[0]}.jpg\n/{frames[1]}.jpg\n")
    (root / "list" / "test_split" / "test8_night.txt").write_text(f"/{frames[2]}.jpg\n")
    return root, pred


def test_evaluate_sums_over_frames_and_categories(culane):
    result = evaluate_culane(*culane)
    assert (result.tp, result.fp, result.fn, result.frames) == (4, 1, 5, 3)
    assert result.precision == pytest.approx(4 / 5) and result.recall == pytest.approx(4 / 9)
    assert result.f1 == pytest.approx(2 * (4 / 5) * (4 / 9) / (4 / 5 + 4 / 9))
    normal, night = result.categories["test0_normal"], result.categories["test8_night"]
    assert (normal.tp, normal.fp, normal.fn) == (4, 1, 2) and (night.tp, night.fn, night.f1) == (0, 3, 0.0)


def test_eval_cli_with_format_culane_prints_the_f1_json_last(culane, capsys):
    from lanenb.cli import main

    root, pred = culane
    assert main(["eval", "--format", "culane", "--pred", str(pred), "--gt", str(root)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["tp"] == 4 and out["f1"] == pytest.approx(0.5714, abs=1e-4)
    assert out["categories"]["test8_night"]["fn"] == 3


def test_a_missing_annotation_is_an_error_naming_it(culane):
    root, pred = culane
    (root / "driver_37_30frame/05181432_0203.MP4/00030.lines.txt").unlink()
    with pytest.raises(EvalError, match=r"annotation not found: .*00030\.lines\.txt \(frame driver_37"):
        evaluate_culane(root, pred)
