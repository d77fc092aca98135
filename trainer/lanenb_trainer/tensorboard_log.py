"""TensorBoard event files beside a run's other outputs, from the events the rank already emits.

Why: TensorBoard is what people open first, and ``%tensorboard --logdir <run dir>`` should work
on a local run and on a cluster run (whose run dir is on the PVC) without lanenb in between. The
rank does not measure anything twice: :class:`TensorBoardSink` is a listener on the rank's
``EventLog`` and turns each ``@lanenb`` event into scalars, written by ``tensorboardX`` (why that
library and not ``torch.utils.tensorboard``: docs/architecture/workflows-faces.md, "TensorBoard and MLflow").

Layout under ``<run dir>/tensorboard/`` (each folder is one TensorBoard "run"):

- ``training/`` (rank 0): ``train/*`` per ``step`` event (x = global step), ``epoch/*`` and
  ``val/*`` per epoch, ``test/*`` (last model) and ``test_best/*`` (``best.pt``) at the end;
- ``rank-<R>/`` (every rank): ``system/*`` (CPU %, RSS, GPU utilisation and memory; x = seconds
  since the rank started) and ``timing/*`` (where a step's time went; x = global step).

Writing does not slow a step: the emitting thread only queues the event; a thread of the sink
turns it into scalars and tensorboardX's own writer thread does the file I/O
(``bench/tensorboard_overhead.py`` measures what is left). A
sink that cannot write (a read-only or full volume) reports once on stderr and goes quiet: the
files are a convenience, never a reason for a run to fail.
"""

from __future__ import annotations

import json
import math
import queue
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["SUBDIR", "TRAINING", "tensorboard_dir", "rank_dir", "TensorBoardSink", "open_sink"]

SUBDIR = "tensorboard"
TRAINING = "training"
# a writer thread that falls behind must not block add_scalar (tensorboardX's default is 10)
_MAX_QUEUE = 10_000
# how often the writer thread flushes: a live %tensorboard sees new points within this
FLUSH_SECS = 5

# step/epoch/eval fields written as scalars (the rest, such as counts of frames, are not curves)
_STEP = ("loss", "seg_loss", "exist_loss", "lr", "images_per_s", "step_time_s")
_EPOCH = ("train_loss", "images_per_s", "duration_s", "lr")
_VAL = ("accuracy", "fp", "fn", "loss", "latency_ms_p50", "latency_ms_p95")
_TEST = ("accuracy", "fp", "fn")
_TIMING_SKIP = ("step", "steps", "host", "device", "pause")
_KINDS = frozenset({"start", "step", "epoch", "eval", "system", "timing", "end"})


def tensorboard_dir(run_dir: str | Path) -> Path:
    """The ``--logdir`` of a run: ``<run dir>/tensorboard``."""
    return Path(run_dir) / SUBDIR


def rank_dir(run_dir: str | Path, rank: int) -> Path:
    """Where ``rank`` writes its system and timing scalars."""
    return tensorboard_dir(run_dir) / f"rank-{int(rank)}"


def _number(value: Any) -> float | None:
    """A scalar TensorBoard can plot, or None (strings, lists, booleans, missing values)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class TensorBoardSink:
    """Scalars from one rank's events into its TensorBoard folders.

    Args:
        run_dir: the run directory (``--run-dir``).
        rank: this rank; rank 0 (``primary``) also writes the ``training/`` scalars.
        primary: whether this rank owns the run's training, validation and test figures.
        writer_factory: ``factory(folder, purge_step)`` builds a writer (default a
            ``tensorboardX.SummaryWriter``).
    """

    def __init__(self, run_dir: str | Path, rank: int, *, primary: bool,
                 writer_factory: Any = None) -> None:
        self.run_dir = Path(run_dir)
        self.rank = rank
        self.primary = primary
        self._factory = writer_factory or _summary_writer
        self._lock = threading.Lock()
        self._writers: dict[str, Any] = {}
        self._t0 = time.time()
        self._failed = False
        self._closed = False
        self._purge_step: int | None = None
        # tensorboardX's add_scalar costs ~20-100 µs (a protobuf, numpy checks, a queue put):
        # the emitting thread only enqueues (~1 µs); this thread builds and queues the scalars
        self._queue: queue.SimpleQueue[tuple[str, int, dict[str, Any], float] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    # -- the EventLog listener -------------------------------------------------------------
    def __call__(self, kind: str, rank: int, fields: Mapping[str, Any]) -> None:
        """Hand one event to the writer thread; never raises (see the module docstring). A rank's
        ``end`` event closes the files: what is queued reaches them before the rank exits."""
        if self._failed or self._closed:
            return
        if kind not in _KINDS:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lanenb-tensorboard", daemon=True)
                self._thread.start()
        self._queue.put((kind, rank, dict(fields), time.time()))
        if kind == "end":
            self.close()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._failed:
                continue
            try:
                self._write(*item)
            except Exception as exc:
                self._failed = True
                print(f"lanenb_trainer: rank {self.rank}: TensorBoard files under {tensorboard_dir(self.run_dir)} "
                      f"stopped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    def _write(self, kind: str, rank: int, f: Mapping[str, Any], wall: float) -> None:
        if kind == "system":
            step = int(round(wall - self._t0))
            self._scalars(self._rank_writer(), "system", f, None, step, wall)
        elif kind == "timing":
            self._scalars(self._rank_writer(), "timing", f, None, f.get("step"), wall,
                          skip=_TIMING_SKIP)
        elif not self.primary or rank != self.rank:
            return
        elif kind == "step":
            self._scalars(self._training(), "train", f, _STEP, f.get("step"), wall)
        elif kind == "epoch":
            self._scalars(self._training(), "epoch", f, _EPOCH, f.get("step"), wall)
        elif kind == "eval":
            split = f.get("split")
            if split == "val":
                self._scalars(self._training(), "val", f, _VAL, f.get("step"), wall)
            elif split == "test":
                prefix = "test_best" if f.get("model") == "best" else "test"
                self._scalars(self._training(), prefix, f, _TEST, f.get("step"), wall)
        elif kind == "start":
            resumed = f.get("resumed_from")
            if isinstance(resumed, Mapping) and _number(resumed.get("step")) is not None:
                # a resumed run replays the steps after its checkpoint (taken after step N; the
                # next point is N + 1): TensorBoard drops the earlier files' points from N + 1 on,
                # so each curve is drawn once
                self._purge_step = int(resumed["step"]) + 1
            config = f.get("config")
            if isinstance(config, Mapping):
                text = "```\n" + json.dumps(config, indent=2, sort_keys=True, default=str) + "\n```"
                self._training().add_text("config", text, 0, wall)

    def _scalars(self, writer: Any, prefix: str, fields: Mapping[str, Any], names: tuple[str, ...] | None,
                 step: Any, wall: float, skip: tuple[str, ...] = ()) -> None:
        step_n = _number(step)
        if step_n is None:
            return
        for name in names if names is not None else tuple(fields):
            if name in skip:
                continue
            value = _number(fields.get(name))
            if value is not None and math.isfinite(value):
                writer.add_scalar(f"{prefix}/{name}", value, int(step_n), wall)

    # -- writers ---------------------------------------------------------------------------
    def _writer(self, folder: Path, purge_step: int | None = None) -> Any:
        key = str(folder)
        writer = self._writers.get(key)
        if writer is None:
            writer = self._writers[key] = self._factory(folder, purge_step)
        return writer

    def _training(self) -> Any:
        # x is the global step everywhere in training/, so a resumed run may purge there
        return self._writer(tensorboard_dir(self.run_dir) / TRAINING, self._purge_step)

    def _rank_writer(self) -> Any:
        return self._writer(rank_dir(self.run_dir, self.rank))

    def close(self, timeout: float = 60.0) -> None:
        """Write what is queued and close the files (idempotent; later events are dropped)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)
        writers, self._writers = list(self._writers.values()), {}
        for writer in writers:
            try:
                writer.close()
            except Exception:
                pass


def _summary_writer(folder: Path, purge_step: int | None = None) -> Any:
    from tensorboardX import SummaryWriter

    folder.mkdir(parents=True, exist_ok=True)
    return SummaryWriter(logdir=str(folder), max_queue=_MAX_QUEUE, flush_secs=FLUSH_SECS, purge_step=purge_step)


def open_sink(run_dir: str | Path, rank: int, *, primary: bool) -> TensorBoardSink | None:
    """A sink for this rank, or None (and one line on stderr) when ``tensorboardX`` is missing:
    an image built before it was a dependency still trains."""
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        if primary:
            print("lanenb_trainer: tensorboardX is not installed: no TensorBoard files "
                  "(pip install tensorboardX, or pass --no-tensorboard)", file=sys.stderr, flush=True)
        return None
    return TensorBoardSink(run_dir, rank, primary=primary)
