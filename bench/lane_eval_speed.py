"""Evaluator speed: vectorised ``lanenb_trainer.evaluation`` vs the per-point reference.

Ground truth is the real TuSimple label file (2,858 frames); predictions are perturbed
copies (jitter, shifted/dropped/extra lanes, empty frames, run_time > 200 ms, too many
lanes). Both implementations must agree to 1e-9 on the totals and on every frame; then
both timings and the speed-up are printed (goal: >= 20x).

    python bench/lane_eval_speed.py [--labels PATH] [--frames 2800] [--repeat 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lane_eval_reference import evaluate_official_style, evaluate_reference, official_fit_backend  # noqa: E402

from lanenb_trainer.evaluation import evaluate  # noqa: E402

DEFAULT_LABELS = HERE.parent.parent / "shared" / "tusimple-real" / "label_data_0313.json"


def _visible(lane: list[Any]) -> list[int]:
    return [i for i, x in enumerate(lane) if x >= 0]


def add_gt_lanes(gt: list[dict[str, Any]], rng: random.Random, fraction: float) -> list[dict[str, Any]]:
    """Copy of ``gt`` where ``fraction`` of the frames gain a 5th (sometimes 6th) lane, a
    shifted copy of an existing one - exercises the official >4-lane rules."""
    out = copy.deepcopy(gt)
    for rec in out:
        if rng.random() >= fraction:
            continue
        for _ in range(rng.choice((1, 1, 2))):
            src = rng.choice(rec["lanes"])
            dx = rng.choice((-1, 1)) * rng.randint(60, 200)
            rec["lanes"].append([x + dx if x >= 0 and 0 <= x + dx < 1280 else -2 for x in src])
    return out


def perturb(gt: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """Predictions: per frame a mix of good, sloppy, missing and spurious lanes plus the
    cases the official rules treat specially."""
    preds = []
    for rec in gt:
        h = len(rec["h_samples"])
        mode = rng.random()
        lanes: list[list[float]] = []
        run_time: float = rng.uniform(2.0, 60.0)
        if mode < 0.03:
            lanes = []  # nothing detected
        elif mode < 0.05:
            run_time = rng.uniform(200.5, 400.0)  # too slow: (0, 0, 1)
            lanes = [list(l) for l in rec["lanes"]]
        elif mode < 0.07:  # more than len(gt) + 2 lanes: (0, 0, 1)
            lanes = [list(l) for l in rec["lanes"]]
            lanes += [[rng.randint(0, 1279) for _ in range(h)] for _ in range(3)]
        else:
            for lane in rec["lanes"]:
                r = rng.random()
                if r < 0.08:
                    continue  # dropped lane
                sigma = rng.choice((0.0, 2.0, 6.0, 12.0))
                shift = rng.choice((0, 0, 0, 20, -20, 19, 25, 40))
                as_float = rng.random() < 0.3
                new = []
                for x in lane:
                    if x < 0:
                        new.append(-2 if rng.random() > 0.03 else rng.randint(0, 1279))
                        continue
                    v = x + shift + rng.gauss(0.0, sigma)
                    if rng.random() < 0.04:
                        v = -2
                    new.append(round(v, 2) if as_float else int(round(v)))
                lanes.append(new)
            if rng.random() < 0.15:  # spurious lane
                lanes.append([rng.randint(0, 1279) if rng.random() < 0.5 else -2 for _ in range(h)])
            rng.shuffle(lanes)
        preds.append(
            {"raw_file": rec["raw_file"], "lanes": lanes, "h_samples": rec["h_samples"], "run_time": run_time}
        )
    return preds


def load_labels(path: Path, frames: int) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh if line.strip()]
    return recs[:frames]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    ap.add_argument("--frames", type=int, default=2800)
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extra-gt-lanes", type=float, default=0.0,
                    help="fraction of gt frames given a 5th/6th lane (default 0: the real file)")
    ap.add_argument("--skip-official", action="store_true",
                    help="do not time the official-style (per-lane numpy + LinearRegression) baseline")
    args = ap.parse_args(argv)

    if not args.labels.is_file():
        print(f"label file not found: {args.labels} (pass --labels)", file=sys.stderr)
        return 1
    rng = random.Random(args.seed)
    gt = load_labels(args.labels, args.frames)
    if args.extra_gt_lanes > 0:
        gt = add_gt_lanes(gt, rng, args.extra_gt_lanes)
    pred = perturb(gt, rng)
    print(f"frames: {len(gt)} (gt lanes {sum(len(r['lanes']) for r in gt)}, "
          f"predicted lanes {sum(len(r['lanes']) for r in pred)})")

    def best_of(fn):
        times, out = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        return min(times), out

    t_ref, ref = best_of(lambda: evaluate_reference(pred, gt))
    t_vec, vec = best_of(lambda: evaluate(pred, gt))
    t_off, off = (None, None)
    if not args.skip_official:
        repeat, args.repeat = args.repeat, 1
        t_off, off = best_of(lambda: evaluate_official_style(pred, gt))
        args.repeat = repeat

    worst = max(abs(ref[0] - vec.accuracy), abs(ref[1] - vec.fp), abs(ref[2] - vec.fn))
    for fs in vec.frames:
        a, p, n = ref[3][fs.raw_file]
        worst = max(worst, abs(a - fs.accuracy), abs(p - fs.fp), abs(n - fs.fn))
    print(f"reference  : accuracy={ref[0]:.12f} fp={ref[1]:.12f} fn={ref[2]:.12f}")
    print(f"vectorised : accuracy={vec.accuracy:.12f} fp={vec.fp:.12f} fn={vec.fn:.12f}")
    if off is not None:
        print(f"official-style: accuracy={off[0]:.12f} fp={off[1]:.12f} fn={off[2]:.12f}")
        worst = max(worst, abs(off[0] - vec.accuracy), abs(off[1] - vec.fp), abs(off[2] - vec.fn))
    print(f"max abs difference (totals and every frame): {worst:.3e}")
    if worst > 1e-9:
        print("MISMATCH: results differ by more than 1e-9", file=sys.stderr)
        return 1
    print(f"reference (per-point Python): {t_ref * 1000:9.1f} ms")
    if t_off is not None:
        print(f"official-style (numpy/lane) : {t_off * 1000:9.1f} ms  [fit: {official_fit_backend()}]")
    print(f"vectorised (numpy)          : {t_vec * 1000:9.1f} ms")
    ratio = t_ref / t_vec
    print(f"speed-up vs per-point Python reference: {ratio:.1f}x")
    if t_off is not None:
        r_off = t_off / t_vec
        print(f"speed-up vs official-style LaneEval   : {r_off:.1f}x (goal >= 20x) "
              f"{'OK' if r_off >= 20 else 'BELOW GOAL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
