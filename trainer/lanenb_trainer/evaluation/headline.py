"""The one headline figure of a run, and which model it belongs to.

A finished run is scored on the test set twice: with the last model and with ``best.pt`` (the
epoch picked on validation frames). Both numbers are real and they differ, so a face that shows
"test acc 0.938" in one place and "0.948" in another, with nothing saying which model each is,
looks wrong. Every face (status line, chart legend, ``%lanejobs``, ``%lanecompare``, the
sidebar, the REST API, ``lanenb jobs list/show``, ``job.metrics``) asks this module instead.

The rule, the same as ``metrics.json``'s top-level ``accuracy``: the headline is ``best.pt``'s
test figure when there is one, else the last model's test figure, else (while training) the
latest validation accuracy. When both test figures exist for different epochs, the other one is
carried as ``other`` so a face shows both, each with its label ("best.pt, epoch 7" / "last,
epoch 10"). A ``Figure``'s ``epoch`` is the 0-based index ``metrics.json``'s ``best`` and the
events carry; its ``label`` counts from 1 as people do (``lanenb_trainer.epochs.epoch_text``).

Without validation (``--no-val``) nothing picks a best model: the trainer scores only the last
model, and ``from_metrics`` ignores an older file's ``best.pt`` test figure whose ``best`` was
kept by train loss (it has no accuracy), so the headline is the last model's ("last, epoch 3").

It lives with the trainer because the trainer applies it first, writing ``metrics.json``'s
``headline``, and ``lanenb.jobs`` (below the analysis layer) applies it to older files for
``job.metrics``; the faces import it as ``lanenb.analysis.headline``. Pure functions of plain
dicts: no imports but the epoch words (``lanenb_trainer.epochs``) and the 200 ms limit (``lane_eval``).

The headline scores the lanes alone; the official TuSimple rule (a frame slower than 200 ms scores
0) depends on the machine's load while the test ran, so it is said beside the figure ("12/40 frames
over the 200 ms real-time limit; official score 0.71"), never instead of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lanenb_trainer.epochs import epoch_text
from lanenb_trainer.evaluation.lane_eval import MAX_RUN_TIME_MS

__all__ = ["Figure", "Headline", "figure", "choose", "from_metrics", "BEST", "LAST", "VAL"]

BEST = "best.pt"
LAST = "last"
VAL = "val"


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Figure:
    """One scored model: ``model`` is ``"best.pt"``, ``"last"`` or ``"val"`` (the latest
    validation, before any test), ``epoch`` its epoch index (from 0, as the events and
    ``metrics.json`` count; ``None`` when unknown); ``label`` counts from 1."""

    model: str
    epoch: int | None
    accuracy: float | None
    fp: float | None = None
    fn: float | None = None
    frames: int | None = None
    official: float | None = None  # the official 200 ms rule's accuracy (None: not scored that way)
    over_time: int | None = None  # frames the official rule zeroed (over 200 ms)
    latency_ms: float | None = None  # the median frame's run_time

    @property
    def realtime(self) -> str:
        """The official rule beside the lanes' figure, when it changed anything: "12/40 frames over
        the 200 ms real-time limit (median 240 ms); official score 0.7100"; "" otherwise."""
        if not self.over_time or self.official is None:
            return ""
        median = f" (median {self.latency_ms:.0f} ms)" if self.latency_ms is not None else ""
        of = f"/{self.frames}" if self.frames is not None else ""
        return (f"{self.over_time}{of} frames over the {MAX_RUN_TIME_MS:.0f} ms real-time limit{median}; "
                f"official score {self.official:.4f}")

    @property
    def label(self) -> str:
        """Which model the numbers are for: "best.pt, epoch 7", "last, epoch 10" (epochs counted
        from 1); a validation figure says its epoch only ("epoch 3"), its split already says "val"."""
        if self.model == VAL:
            return "latest epoch" if self.epoch is None else epoch_text(self.epoch)
        return self.model if self.epoch is None else f"{self.model}, {epoch_text(self.epoch)}"

    @property
    def split(self) -> str:
        return "val" if self.model == VAL else "test"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "epoch": self.epoch, "label": self.label, "split": self.split,
                "accuracy": self.accuracy, "fp": self.fp, "fn": self.fn, "frames": self.frames,
                "official_accuracy": self.official, "over_time_frames": self.over_time,
                "latency_ms_p50": self.latency_ms, "realtime": self.realtime}


@dataclass(frozen=True)
class Headline:
    """The headline ``primary`` figure and, when the other test model was scored on another
    epoch, that one as ``other`` (shown beside it, never instead of it)."""

    primary: Figure
    other: Figure | None = None

    @property
    def accuracy(self) -> float | None:
        return self.primary.accuracy

    @property
    def split(self) -> str:
        return self.primary.split

    @property
    def label(self) -> str:
        return self.primary.label

    def short(self, digits: int = 4) -> str:
        """Table cell: "0.9380 test (best.pt, epoch 7); 0.9480 (last, epoch 10)"."""
        text = f"{_fmt(self.primary.accuracy, digits)} {self.split} ({self.primary.label})"
        if self.other is not None:
            text += f"; {_fmt(self.other.accuracy, digits)} ({self.other.label})"
        return text

    def text(self, digits: int = 4) -> str:
        """Status line part: "test acc 0.9380 (best.pt, epoch 7), 0.9480 (last, epoch 10)"."""
        text = f"{self.split} acc {_fmt(self.primary.accuracy, digits)} ({self.primary.label})"
        if self.other is not None:
            text += f", {_fmt(self.other.accuracy, digits)} ({self.other.label})"
        if self.primary.realtime:
            text += f"; {self.primary.realtime}"
        return text

    def long(self, digits: int = 4) -> str:
        """With FP/FN and frames, for summaries: "test accuracy 0.9380 FP 0.0500 FN 0.0400
        (best.pt, epoch 7; 32 frames); last, epoch 10: accuracy 0.9480 FP ... FN ..."."""
        p = self.primary
        frames = f"; {p.frames} frames" if p.frames is not None else ""
        text = (f"{p.split} accuracy {_fmt(p.accuracy, digits)} FP {_fmt(p.fp, digits)} FN {_fmt(p.fn, digits)} "
                f"({p.label}{frames})")
        if p.realtime:
            text += f"; {p.realtime}"
        if self.other is not None:
            o = self.other
            text += (f"; {o.label}: accuracy {_fmt(o.accuracy, digits)} FP {_fmt(o.fp, digits)} "
                     f"FN {_fmt(o.fn, digits)}")
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON for the REST API, the sidebar and ``--json``: the primary figure's fields plus
        ``text`` (a status line's words), ``cell`` (a table's) and ``other`` (the other model's
        figure, or ``None``): faces show these words rather than re-deriving them."""
        return {**self.primary.to_dict(), "text": self.text(), "cell": self.short(),
                "other": None if self.other is None else self.other.to_dict()}


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def figure(model: str, result: Mapping[str, Any] | None, epoch: Any = None) -> Figure | None:
    """A ``Figure`` from a test/val result dict (``accuracy``, ``fp``, ``fn``, ``frames``);
    ``None`` when there is no result or it has no accuracy."""
    if not isinstance(result, Mapping) or _num(result.get("accuracy")) is None:
        return None
    return Figure(model=model, epoch=_int(epoch), accuracy=_num(result.get("accuracy")), fp=_num(result.get("fp")),
                  fn=_num(result.get("fn")), frames=_int(result.get("frames")),
                  official=_num(result.get("official_accuracy")), over_time=_int(result.get("over_time_frames")),
                  latency_ms=_num(result.get("latency_ms_p50")))


def choose(last: Figure | None, best: Figure | None, val: Figure | None = None) -> Headline | None:
    """The rule: ``best.pt``'s test figure, else the last model's, else validation; the other
    test figure rides along when it is for another epoch (the same epoch is the same model)."""
    if best is not None:
        other = last if last is not None and last.epoch != best.epoch else None
        return Headline(best, other)
    if last is not None:
        return Headline(last)
    if val is not None:
        return Headline(val)
    return None


def from_metrics(metrics: Mapping[str, Any] | None) -> Headline | None:
    """The headline of a finished run's ``metrics.json`` (``job.metrics``): ``test`` is the last
    model's (after epoch ``epochs - 1``), ``test_best`` is ``best.pt``'s (epoch ``best_epoch``).
    Older files with only ``test`` give the last model's figure, and so does a run without
    validation: its ``best`` (kept by train loss, no ``accuracy``) was not chosen on validation
    frames, so its ``test_best`` is not presented as the run's best model."""
    if not isinstance(metrics, Mapping):
        return None
    epochs = _int(metrics.get("epochs"))
    last = figure(LAST, metrics.get("test"), epochs - 1 if epochs else None)
    kept = metrics.get("best")
    if isinstance(kept, Mapping) and kept.get("accuracy") is None:
        return choose(last, None)  # --no-val: nothing validated, no best model to present
    best_epoch = metrics.get("best_epoch")
    if best_epoch is None and isinstance(kept, Mapping):
        best_epoch = kept.get("epoch")
    best = figure(BEST, metrics.get("test_best"), best_epoch)
    return choose(last, best)
