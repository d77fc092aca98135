"""Training targets and post-processing agree (issue 8, item 1): the real TuSimple labels,
rendered into the trainer's masks at 288x800 with the default settings and read back as if they
were the network's probabilities, score like the labels themselves."""

from __future__ import annotations

import json

import numpy as np

from lanenb_trainer.data.augment import affine_matrix, apply_affine
from lanenb_trainer.data.masks import assign_slots, existence_from_points, lane_runs, render_mask
from lanenb_trainer.evaluation.lane_eval import evaluate
from lanenb_trainer.models.postprocess import probmaps_to_lanes


def test_real_labels_round_trip_through_masks_and_post_processing(real_labels_path):
    path = real_labels_path
    records = [json.loads(line) for line in path.read_text().splitlines()]
    size, orig = (288, 800), (720, 1280)
    m = affine_matrix(orig, size, None)
    preds = []
    for rec in records:
        slots = assign_slots(rec["lanes"], rec["h_samples"], orig[1], orig[0])
        runs = [(s, [apply_affine(m, run) for run in lane_runs(lane, rec["h_samples"])])
                for s, lane in zip(slots, rec["lanes"]) if s >= 0]
        mask = render_mask(runs, *size)  # the trainer's default thickness
        prob = np.eye(5, dtype=np.float32)[mask].transpose(2, 0, 1)
        exist = existence_from_points(runs, *size, 16)
        preds.append({"raw_file": rec["raw_file"], "run_time": 0,
                      "lanes": probmaps_to_lanes(prob, exist, rec["h_samples"], orig)})
    result = evaluate(preds, records)
    # all-(-2) lanes of the official file and 5-lane frames (4 slots) cost the rest
    assert len(records) == 2858 and result.accuracy >= 0.98, result.summary()
