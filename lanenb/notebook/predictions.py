"""``PredictionViewer``: where is the model wrong? Predicted vs ground-truth lanes per frame.

Scores every test frame with the exact TuSimple evaluator, lists the frames sortable by
accuracy, FP or FN with the worst first, and draws the selected frame: ground truth thin
white, predictions in colour. A headless run keeps a grid of the worst frames and the table.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

import cv2
import ipywidgets as widgets
import numpy as np

from lanenb.errors import UserError
from lanenb.jobs import Job
from lanenb.notebook.dataset import encode_png
from lanenb.notebook.fallback import StaticFallback
from lanenb_trainer.data.labels import load_image
from lanenb_trainer.data.preview import draw_lanes
from lanenb_trainer.evaluation.jsonl import read_json_lines
from lanenb_trainer.evaluation.lane_eval import FrameScore, evaluate

__all__ = ["PredictionViewer", "PredictionError"]

SORT_KEYS = {
    "worst accuracy first": (lambda f: (f.accuracy, -f.fn, -f.fp)),
    "most false negatives first": (lambda f: (-f.fn, f.accuracy)),
    "most false positives first": (lambda f: (-f.fp, f.accuracy)),
    "best accuracy first": (lambda f: (-f.accuracy, f.fn)),
    "file name": (lambda f: f.raw_file),
}


class PredictionError(UserError, ValueError):
    """The run has no predictions or ground truth to compare; the message says what is missing."""


def _run_paths(source: Job | str | os.PathLike[str], data: str | None) -> tuple[Path, Path, Path]:
    if isinstance(source, Job):
        if not source.run_dir:
            raise PredictionError(f"job {source.name!r} has no run directory on this machine")
        run_dir = Path(source.run_dir)
    elif isinstance(source, (str, os.PathLike)):
        run_dir = Path(source).expanduser()
    else:
        raise PredictionError(f"job_or_run_dir={source!r}: must be a Job or a run directory")
    if not run_dir.is_dir():
        raise PredictionError(f"run directory {str(run_dir)!r} does not exist (on this machine)")
    pred = run_dir / "predictions" / "test.json"
    if not pred.is_file() and not any((run_dir / "checkpoints" / n).is_file() for n in ("best.pt", "last.pt")):
        raise PredictionError(f"{pred} does not exist and the run has no checkpoint to predict with: "
                              f"the run has not finished an epoch (or it has no test split)")
    if data is None:
        try:
            data = json.loads((run_dir / "config.json").read_text())["data"]
        except (OSError, ValueError, KeyError) as exc:
            raise PredictionError(f"cannot tell the dataset of {run_dir} from config.json ({exc}); "
                                  f"pass data=...") from None
    gt = Path(data) / "test_label.json"
    if not gt.is_file():
        raise PredictionError(f"ground truth {gt} does not exist; pass data= the dataset root")
    return run_dir, pred, gt


class PredictionViewer(StaticFallback, widgets.VBox):
    """Per-frame accuracy/FP/FN of a run's test predictions, worst first, with lanes drawn.

    One accuracy number hides where the model fails (night, curves, occlusion); the worst
    frames, drawn, show it. A run stopped before its test evaluation is predicted now from its
    checkpoint (on the CPU), so the viewer works on any run that saved one.

    Args:
        job_or_run_dir: a finished ``Job`` or its run directory (on this machine).
        data: dataset root (default: the one in the run's ``config.json``).
        sort: one of ``PredictionViewer.SORTS`` (default worst accuracy first).
        rows: frames listed.
        **kwargs: passed to ``ipywidgets.VBox`` (``layout`` ...).

    Raises:
        PredictionError: no predictions, no ground truth, or a bad argument.
    """

    SORTS = tuple(SORT_KEYS)

    def __init__(self, job_or_run_dir: Job | str | os.PathLike[str], data: str | None = None,
                 sort: str = "worst accuracy first", rows: int = 50, **kwargs: Any) -> None:
        if sort not in SORT_KEYS:
            raise PredictionError(f"sort={sort!r}: must be one of {', '.join(SORT_KEYS)}")
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise PredictionError(f"rows={rows!r}: must be an integer >= 1")
        self.run_dir, self.pred_path, self.gt_path = _run_paths(job_or_run_dir, data)
        self.data_root = self.gt_path.parent
        gt = [rec for _, rec in read_json_lines(self.gt_path, "ground-truth file")]
        if self.pred_path.is_file():
            self.source = f"{self.pred_path}"
            preds = [rec for _, rec in read_json_lines(self.pred_path, "prediction file")]
        else:  # stopped before its test evaluation: predict now with its checkpoint (lanenb.predict)
            from lanenb.inference.predict import Predictor, predict_split

            model = Predictor(self.run_dir, device="cpu")
            preds, _ = predict_split(model, self.data_root, "test", self.run_dir, draw=0)
            self.source = f"predicted now with {model.path}"
        self.result = evaluate(preds, gt)
        self.rows = rows
        self._pred = {rec["raw_file"]: rec for rec in preds}
        self._gt = {rec["raw_file"]: rec for rec in gt}
        self.sort = widgets.Dropdown(options=self.SORTS, value=sort, description="sort")
        self.frames = widgets.Select(options=[], rows=12, layout=widgets.Layout(width="560px"))
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.detail = widgets.HTML()
        summary = (f"<b>{html.escape(str(self.run_dir))}</b> ({html.escape(self.source)}): "
                   f"{len(self.result.frames)} test frames, "
                   f"accuracy {self.result.accuracy:.4f}, FP {self.result.fp:.4f}, FN {self.result.fn:.4f}")
        self.sort.observe(lambda _c: self._list(), names="value")
        self.frames.observe(lambda _c: self._show(), names="value")
        super().__init__(children=[widgets.HTML(summary), self.sort, widgets.HBox([self.frames, self.detail]),
                                   self.image], **kwargs)
        self._list()
        self._static = self._worst_grid()

    def ordered(self) -> list[FrameScore]:
        """Frames in the chosen order (the Select's order), to read the scores in code.

        Returns:
            Every test frame's ``FrameScore`` (accuracy, fp, fn, matched lanes ...).
        """
        return sorted(self.result.frames, key=SORT_KEYS[self.sort.value])

    def _list(self) -> None:
        frames = self.ordered()[: self.rows]
        self.frames.options = [(f"acc {f.accuracy:.3f}  FP {f.fp:.2f}  FN {f.fn:.2f}  {f.raw_file}", f.raw_file)
                               for f in frames]
        if frames:
            self.frames.value = frames[0].raw_file

    def draw(self, raw_file: str, width: int | None = None) -> np.ndarray:
        """RGB frame with ground truth (thin white) and predicted lanes (colour), e.g. for a report.

        Args:
            raw_file: the frame's ``raw_file`` as in the label file (see ``ordered()``).
            width: scale to this many pixels wide; ``None`` keeps the frame's size.

        Returns:
            An ``(H, W, 3)`` uint8 RGB array.

        Raises:
            KeyError: ``raw_file`` is not a test frame of this dataset.
            OSError: the image file cannot be read.
        """
        gt, pred = self._gt[raw_file], self._pred.get(raw_file, {"lanes": []})
        img = cv2.cvtColor(load_image(self.data_root / raw_file), cv2.COLOR_BGR2RGB)
        img = draw_lanes(img, gt["lanes"], gt["h_samples"], thickness=1, colours=[(255, 255, 255)])
        img = draw_lanes(img, pred.get("lanes", []), gt["h_samples"])
        if width:
            img = cv2.resize(img, (width, int(round(img.shape[0] * width / img.shape[1]))),
                             interpolation=cv2.INTER_AREA)
        return img

    def _show(self) -> None:
        raw = self.frames.value
        if not raw:
            return
        score = next(f for f in self.result.frames if f.raw_file == raw)
        self.image.value = encode_png(self.draw(raw, width=800))
        lanes = ", ".join(f"{a:.2f}" for a in score.lane_accuracy) or "-"
        self.detail.value = (f"<b>{html.escape(raw)}</b><br>accuracy {score.accuracy:.3f}<br>FP {score.fp:.3f}, "
                             f"FN {score.fn:.3f}<br>{score.matched} of {score.num_gt} lanes matched, "
                             f"{score.num_pred} predicted<br>per-lane point accuracy: {lanes}"
                             + (f"<br>penalty: {html.escape(score.penalty)}" if score.penalty else ""))

    def _worst_grid(self, n: int = 4) -> bytes:
        tiles = []
        for f in self.result.worst(n):
            tile = self.draw(f.raw_file, width=480)
            cv2.putText(tile, f"acc {f.accuracy:.2f} FP {f.fp:.2f} FN {f.fn:.2f}  {f.raw_file}", (6, 18),
                        cv2.FONT_HERSHEY_SIMPLEX, 0.42, (255, 255, 0), 1, cv2.LINE_AA)
            tiles.append(tile)
        h = max(t.shape[0] for t in tiles)
        tiles = [np.pad(t, ((0, h - t.shape[0]), (0, 0), (0, 0))) for t in tiles]
        rows = [np.hstack(tiles[i:i + 2] + ([np.zeros_like(tiles[0])] if len(tiles[i:i + 2]) == 1 else []))
                for i in range(0, len(tiles), 2)]
        return encode_png(np.vstack(rows))

    def static_png(self) -> bytes | None:
        return self._static

    def static_text(self) -> str:
        lines = [(f"{self.run_dir}: accuracy {self.result.accuracy:.4f} FP {self.result.fp:.4f} "
                  f"FN {self.result.fn:.4f} over {len(self.result.frames)} frames; worst frames:")]
        lines += [f"  acc {f.accuracy:.3f} FP {f.fp:.2f} FN {f.fn:.2f} {f.raw_file}" for f in self.result.worst(10)]
        return "\n".join(lines)
