"""``RunState``: the one reducer every view of a run folds its updates into.

trainer -> ``@lanenb`` events -> any launcher -> ``Job.poll`` -> ``RunState.apply`` -> the
console, the notebook's live view, ``%lanejobs`` and (later) the sidebar. Views never parse
events themselves, so a new event field is read in one place.

Pure and bounded: ``apply`` only looks at the update it is given (times come from the
events, never from a clock here), and every history is a ``BucketSeries`` or a bounded
deque, so a week-long run and a million log lines keep O(1) memory.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lanenb.analysis.event_text import event_text
from lanenb.analysis.headline import BEST, LAST, VAL, Figure, Headline, choose, figure, from_metrics
from lanenb.analysis.series import BucketSeries
from lanenb.charts.formats import format_duration  # the one spelling of a duration, re-exported
from lanenb.launch.lines import LogLine
from lanenb_trainer.epochs import epoch_text
from lanenb_trainer.events import Event

if TYPE_CHECKING:
    from lanenb.contract.status import JobStatus
    from lanenb.jobs.job import Job
    from lanenb.jobs.updates import Update

__all__ = ["RunState", "fill_tests", "SYSTEM_FIELDS", "TIMING_FIELDS", "TIMING_HISTORY", "GPU_RECENT", "tail_state",
           "fill_config", "format_duration", "SETTINGS", "MAX_MARKS", "loader_workers", "changed_settings"]

# per-rank system samples kept as series (GPU fields only appear on GPU ranks)
SYSTEM_FIELDS = ("cpu_percent", "rss_mb", "gpu_util", "gpu_mem_mb")
_RATE_WINDOW = 20  # step events used for the ETA's rate
# states where no rank trains, beside ``RunState.finished``'s: no ETA (``eta_s``)
_NOT_TRAINING = frozenset({"suspended", "restarting", "lost", "unknown"})
# the per-step means of a ``timing`` window (docs/EVENTS.md), seconds
TIMING_FIELDS = ("step_s", "data_s", "h2d_s", "compute_s", "exchange_s", "optimizer_s", "other_s")
# timing windows kept per rank: enough for the doctor to ask "did it hold in 2 of the last 3
# full windows?" (one slow window is not a verdict; short flushes at an epoch's end are skipped),
# few enough that a 1000-rank run stays small
TIMING_HISTORY = 5
# raw GPU utilisation samples kept per rank (the series buckets merge them; the doctor wants the
# latest ones as they were): at the default 2 s system interval, the last ~30 s
GPU_RECENT = 16
# resumes kept for the charts' rules (the latest ones): a run resumed more often than this has
# more rules than a 340 px chart can tell apart anyway
MAX_MARKS = 64
# the settings a resume may change that the doctor's advice names, in words ("loader workers
# 2 -> 6"): the resume marks and the verdict's "did it help" clause compare these
SETTINGS = {"num_workers": "loader workers", "batch_size": "per-rank batch"}


@dataclass
class RunState:
    """Everything a view shows about one run, folded from its updates.

    Args:
        max_points: buckets per metric series (see ``BucketSeries``).
        max_log_lines: log lines kept for the log pane (older ones are counted, not kept).
    """

    max_points: int = 1024
    max_log_lines: int = 2000
    # job
    state: str = "pending"
    reason: str | None = None
    # from the start event of rank 0
    world_size: int | None = None
    engine: str | None = None
    device: str | None = None
    backbone: str | None = None
    batch_size: int | None = None
    epochs: int | None = None
    total_steps: int | None = None
    steps_per_epoch: int | None = None
    train_frames: int | None = None
    started_t: float | None = None
    # progress
    step: int = 0
    epoch: int = 0
    last_t: float | None = None
    images_per_s: float | None = None
    loss: float | None = None
    lr: float | None = None
    # results
    val: dict[str, Any] = field(default_factory=dict)
    test: dict[str, Any] | None = None  # the headline test result (best.pt's, else the last model's)
    # the test figures by model, "best.pt" and "last", each with its epoch (``headline()``)
    tests: dict[str, Figure] = field(default_factory=dict)
    best: dict[str, Any] | None = None
    end_status: str | None = None
    duration_s: float | None = None
    checkpoint: str | None = None
    # restarts that continued from a checkpoint, and the steps they took again (``resumed`` events)
    resumes: int = 0
    steps_lost: int = 0
    preempted: dict[str, Any] | None = None  # the last ``preempted`` event's step, ranks, checkpoint_s
    drawn_to: int = 0  # the highest step in the series: steps taken again after a restart are drawn once
    epochs_drawn: int = -1  # the same for epochs: an epoch ended again after a kill is drawn once
    # one per resume (the latest MAX_MARKS, oldest first): where the charts draw a rule and what
    # its tooltip says (``_on_resumed``)
    resume_marks: list[dict[str, Any]] = field(default_factory=list)
    # the launch before the latest resume that had timing windows: its settings, ranks and
    # windows, so the doctor can say whether a changed setting helped (``_on_resumed``)
    previous_launch: dict[str, Any] | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    # rank 0's resolved TrainConfig (loader workers, batch size: what the doctor's advice names)
    config: dict[str, Any] = field(default_factory=dict)
    # per rank: host from its start or timing event
    hosts: dict[int, str] = field(default_factory=dict)
    # per rank: the latest timing window's fields, ``host``, ``device``, ``pause_total_s`` and
    # ``history`` (the last TIMING_HISTORY windows, oldest first; see ``_on_timing``)
    timing: dict[int, dict[str, Any]] = field(default_factory=dict)
    # per rank: the last GPU_RECENT (t, gpu_util) samples, unbucketed
    gpu_recent: dict[int, collections.deque] = field(default_factory=dict)
    # histories
    series: dict[str, BucketSeries] = field(default_factory=dict)
    epochs_hist: dict[str, BucketSeries] = field(default_factory=dict)
    system: dict[int, dict[str, BucketSeries]] = field(default_factory=dict)
    system_last: dict[int, dict[str, Any]] = field(default_factory=dict)
    # bounded at max_log_lines by __post_init__ (a default cannot see max_log_lines)
    logs: collections.deque[LogLine] = field(default_factory=collections.deque)
    lines_seen: int = 0
    events_seen: int = 0
    _rate: collections.deque = field(default_factory=lambda: collections.deque(maxlen=_RATE_WINDOW), repr=False)
    # the settings and ranks of the launch before the latest rank-0 start (None: the first launch)
    _launch_before: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.max_log_lines, int) or self.max_log_lines < 1:
            raise ValueError(f"max_log_lines={self.max_log_lines!r}: must be an integer >= 1")
        if self.logs.maxlen is None:
            self.logs = collections.deque(self.logs, maxlen=self.max_log_lines)

    # ------------------------------------------------------------------ folding
    def _series(self, table: dict[str, BucketSeries], name: str) -> BucketSeries:
        if name not in table:
            table[name] = BucketSeries(self.max_points)
        return table[name]

    def apply(self, update: Update) -> RunState:
        """Fold one ``Job.poll`` update (a status change or a log line with its event)."""
        if update.status is not None:
            self.fold_status(update.status)
        if update.line is not None:
            self.fold_line(update.line)
        return self

    def apply_all(self, updates: Iterable[Update]) -> RunState:
        for update in updates:
            self.apply(update)
        return self

    def fold_status(self, status: JobStatus) -> None:
        self.state = status.state.value
        self.reason = status.reason

    def fold_line(self, line: LogLine) -> None:
        """A log line; its event (``line.event``, if any) is folded too and goes to the log pane
        in the console's words; plain lines go to the log pane as they are."""
        self.lines_seen += 1
        event = line.event
        if event is not None:
            self.fold(event)
            text = event_text(event)  # the console's wording; system samples and timing windows are charted instead
            if text is not None:
                rank = line.rank if line.rank is not None else event.rank
                self.logs.append(LogLine(rank, text.splitlines()[0] if event.kind == "error" else text,
                                         line.source, line.stream, event=event))
            return
        self.logs.append(line)

    def fold(self, ev: Event) -> None:
        """One ``@lanenb`` event (docs/EVENTS.md)."""
        self.events_seen += 1
        handler = getattr(self, f"_on_{ev.kind}", None)
        if handler is not None:
            handler(ev)

    def _on_start(self, ev: Event) -> None:
        if isinstance(ev.get("host"), str):
            self.hosts[ev.rank] = ev.get("host")
        if ev.rank != 0:
            return
        cfg = ev.get("config") or {}
        if self.world_size is not None:  # a relaunch: what the launch before it ran with
            self._launch_before = {"config": dict(self.config), "world_size": self.world_size}
        if isinstance(cfg, dict):
            self.config.update(cfg)  # the trainer's resolved values win over a spec's (fill_config)
        self.world_size = ev.get("world_size")
        self.engine = ev.get("engine")
        self.device = ev.get("device")
        self.backbone = cfg.get("backbone")
        self.batch_size = cfg.get("batch_size")
        self.epochs = cfg.get("epochs")
        self.total_steps = ev.get("total_steps")
        self.steps_per_epoch = ev.get("steps_per_epoch")
        self.train_frames = ev.get("train_frames")
        self.started_t = self.started_t or ev.t
        resumed = ev.get("resumed_from") or {}
        self.step = max(self.step, int(resumed.get("step") or 0))
        self.end_status = None  # a restarted run: the previous start's end is not this one's
        if self.state == "pending":
            self.state = "running"

    def _on_step(self, ev: Event) -> None:
        step = ev.get("step")
        if not isinstance(step, int):
            return
        self.step = step
        self.epoch = ev.get("epoch", self.epoch)
        self.total_steps = ev.get("total_steps") or self.total_steps
        self.last_t = ev.t
        self.loss = ev.get("loss")
        self.lr = ev.get("lr")
        self.images_per_s = ev.get("images_per_s")
        self._rate.append((ev.t, step))
        if step <= self.drawn_to:  # taken again after a restart (a deterministic run: the same values)
            return
        self.drawn_to = step
        for name in ("loss", "lr", "images_per_s", "seg_loss", "exist_loss"):
            if name in ev.data:
                self._series(self.series, name).append(step, ev.get(name))

    def _on_epoch(self, ev: Event) -> None:
        epoch = ev.get("epoch")
        if not isinstance(epoch, int):
            return
        self.epoch = epoch
        if epoch <= self.epochs_drawn:  # ended again after a kill before its checkpoint: drawn once
            return
        self.epochs_drawn = epoch
        for name in ("train_loss", "val_accuracy", "val_fp", "val_fn", "val_loss"):
            if ev.get(name) is not None:
                self._series(self.epochs_hist, name).append(epoch, ev.get(name))
        if ev.get("val_accuracy") is not None:
            self.val = {"epoch": epoch, "accuracy": ev.get("val_accuracy"), "fp": ev.get("val_fp"),
                        "fn": ev.get("val_fn")}

    def _on_eval(self, ev: Event) -> None:
        if ev.get("split") != "test":
            return
        result = {k: ev.get(k) for k in ("accuracy", "fp", "fn", "frames")}
        epoch = ev.get("epoch")
        if ev.get("model") in ("best", BEST):
            model = BEST
        else:  # the last model's event carries the epochs done (the loop's counter): its epoch is one less
            model = LAST
            epoch = epoch - 1 if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch > 0 else None
        found = figure(model, result, epoch)
        if found is not None:
            self.tests[model] = found
        if model == BEST or BEST not in self.tests:  # best.pt's is the headline whichever came first
            self.test = {**result, "model": "best" if model == BEST else "last"}

    def _on_checkpoint(self, ev: Event) -> None:
        self.checkpoint = ev.get("path")

    def _on_preempted(self, ev: Event) -> None:
        self.preempted = {k: ev.get(k) for k in ("step", "epoch", "ranks", "checkpoint_s", "since_signal_s")}

    def _on_resumed(self, ev: Event) -> None:
        """Counts and totals so far, as the trainer keeps them in the run dir: the latest event
        is right even when a view reads only the last launch's log (a relaunched pod's).

        The last launch's timing windows judged its settings (a resume may change the loader
        workers), so they are cleared for the doctor to measure anew, and kept as
        ``previous_launch`` for it to say whether the change helped."""
        count, total, step = ev.get("count"), ev.get("steps_lost_total"), ev.get("step")
        if isinstance(count, int) and count >= self.resumes:
            self.resumes = count
            self.steps_lost = total if isinstance(total, int) else self.steps_lost
        if isinstance(step, int):
            self.step = step  # the run is back at its checkpoint
            self._rate.clear()  # the rate of the last launch: a restart's pause is not training
        before = self._launch_before or {}
        self._mark(ev, changed_settings(before.get("config") or {}, self.config))
        windows = {rank: list(entry["history"]) for rank, entry in self.timing.items() if entry["history"]}
        if windows:  # a launch that ended before its first window keeps the one before as the baseline
            self.previous_launch = {"config": dict(before.get("config") or {}),
                                    "world_size": before.get("world_size"), "timing": windows,
                                    "step": step if isinstance(step, int) else None}
        for entry in self.timing.values():
            entry["history"].clear()

    def _mark(self, ev: Event, changes: list[tuple[str, Any, Any]]) -> None:
        """A resume as the charts mark it: its step (and epoch), steps lost, a resize's ranks
        and the settings it changed; a log read twice keeps one mark per resume ``count``."""
        step = ev.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            return
        resized = ev.get("resized") if isinstance(ev.get("resized"), dict) else None
        lost = ev.get("steps_lost")
        mark = {"count": ev.get("count"), "step": step, "epoch": ev.get("epoch"),
                "steps_per_epoch": self.steps_per_epoch, "steps_lost": lost if isinstance(lost, int) else 0,
                "preempted": bool(ev.get("preempted")),
                "resized": {"from": resized.get("from"), "to": resized.get("to")} if resized else None,
                "changes": [{"setting": name, "from": old, "to": new} for name, old, new in changes]}
        self.resume_marks = [m for m in self.resume_marks
                             if mark["count"] is None or m["count"] != mark["count"]][-(MAX_MARKS - 1):]
        self.resume_marks.append(mark)

    def _on_system(self, ev: Event) -> None:
        table = self.system.setdefault(ev.rank, {})
        last = self.system_last.setdefault(ev.rank, {})
        for name in SYSTEM_FIELDS:
            value = ev.get(name)
            if value is not None:
                self._series(table, name).append(ev.t, value)
                last[name] = value
        if ev.get("gpu_mem_total_mb") is not None:
            last["gpu_mem_total_mb"] = ev.get("gpu_mem_total_mb")
        last["t"] = ev.t
        util = ev.get("gpu_util")
        if isinstance(util, (int, float)) and math.isfinite(util):
            recent = self.gpu_recent.get(ev.rank)
            if recent is None:
                recent = self.gpu_recent[ev.rank] = collections.deque(maxlen=GPU_RECENT)
            recent.append((ev.t, float(util)))

    def _on_timing(self, ev: Event) -> None:
        """A rank's step-time window (docs/EVENTS.md ``timing``): per-step means of where the
        time went. Kept per rank as the latest fields plus the last ``TIMING_HISTORY`` windows,
        so every view and the doctor read the same smoothed numbers."""
        step_s = _seconds(ev.get("step_s"))
        steps = ev.get("steps")
        if step_s is None or step_s <= 0 or not isinstance(steps, int) or steps < 1:
            return  # an empty or broken window says nothing about the step
        window: dict[str, Any] = {"t": ev.t, "step": ev.get("step"), "steps": steps}
        for name in TIMING_FIELDS:
            window[name] = _seconds(ev.get(name)) or 0.0
        window["step_s"] = step_s
        entry = self.timing.setdefault(ev.rank, {"history": [], "pause_total_s": 0.0, "pauses": {}})
        history = entry["history"]
        if history and isinstance(window["step"], int) and history[-1].get("step") == window["step"]:
            history[-1] = window  # the same window read twice (a log re-read): keep one
        else:
            history.append(window)
            del history[:-TIMING_HISTORY]
            pause_s = _seconds(ev.get("pause_s")) or 0.0
            entry["pause_total_s"] += pause_s
            for what in ev.get("pause") or []:
                if isinstance(what, str) and len(entry["pauses"]) < 8:
                    entry["pauses"][what] = entry["pauses"].get(what, 0) + 1
        entry.update({k: v for k, v in window.items()})
        entry["device"] = ev.get("device") if isinstance(ev.get("device"), str) else entry.get("device")
        if isinstance(ev.get("host"), str):
            self.hosts[ev.rank] = ev.get("host")
        entry["host"] = self.hosts.get(ev.rank)

    def _on_error(self, ev: Event) -> None:
        if len(self.errors) < 20:  # the first errors are the causes; later ones are fallout
            self.errors.append({"rank": ev.rank, "type": ev.get("type"), "message": ev.get("message"),
                                "traceback": ev.get("traceback")})

    def _on_end(self, ev: Event) -> None:
        if ev.rank != 0:
            return
        self.end_status = ev.get("status")
        self.duration_s = ev.get("duration_s")
        self.best = ev.get("best")
        if ev.get("test") and self.test is None:
            self.test = dict(ev.get("test"))
            found = figure(LAST, self.test)
            if found is not None:
                self.tests.setdefault(LAST, found)
        if isinstance(ev.get("step"), int):
            self.step = ev.get("step")

    # ------------------------------------------------------------------ derived
    @property
    def finished(self) -> bool:
        return self.state in ("succeeded", "failed", "cancelled", "preempted")

    @property
    def progress(self) -> float | None:
        """Share of the steps done, 0..1 (None before the start event)."""
        if not self.total_steps:
            return None
        if self.state == "succeeded":
            return 1.0
        return min(1.0, self.step / self.total_steps)

    @property
    def rate(self) -> float | None:
        """Steps per second over the last step events (event times, not a local clock)."""
        if len(self._rate) < 2:
            return None
        (t0, s0), (t1, s1) = self._rate[0], self._rate[-1]
        if t1 <= t0 or s1 <= s0:
            return None
        return (s1 - s0) / (t1 - t0)

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the recent rate: None until two step events arrived, and whenever the
        ranks are not training (suspended, restarting, preempted or otherwise ended): no face
        shows an "ETA 31s" that is not counting down. A ``pending`` state keeps its ETA: a reducer
        fed only a log's tail (the team view) was never told the state, its steps say it trains."""
        if self.finished or self.state in _NOT_TRAINING or not self.total_steps:
            return None
        rate = self.rate
        if rate is None:
            return None
        return max(0.0, (self.total_steps - self.step) / rate)

    @property
    def global_batch(self) -> int | None:
        """Images per step over all ranks (None until the start event gave batch and ranks)."""
        from lanenb_trainer.config import global_batch

        if self.batch_size and self.world_size:
            return global_batch(self.batch_size, self.world_size)
        return None

    def headline(self) -> Headline | None:
        """The run's headline figure with its model label (``lanenb.analysis.headline``'s rule:
        best.pt's test, else the last model's, else the latest validation), and the other test
        model beside it when both were scored on different epochs. A run without validation
        (``use_val`` false) has no best model: an older trainer's best.pt test is not its headline."""
        val = figure(VAL, self.val, self.val.get("epoch")) if self.val else None
        best = self.tests.get(BEST) if self.config.get("use_val") is not False else None
        return choose(self.tests.get(LAST), best, val)

    def accuracy(self) -> float | None:
        """The headline accuracy (``headline()``): what a table's one accuracy column shows."""
        found = self.headline()
        return None if found is None else found.accuracy

    def log_tail(self, n: int = 20, rank: int | str | None = "all", errors_only: bool = False) -> list[LogLine]:
        """The last ``n`` kept lines, optionally of one rank (``None`` = launcher lines); an
        event's line reads as the console words it, ``error`` marks what views highlight."""
        out: list[LogLine] = []
        for entry in reversed(self.logs):
            if rank != "all" and entry.rank != rank:
                continue
            if errors_only and not entry.error:
                continue
            out.append(entry)
            if len(out) >= n:
                break
        return out[::-1]

    def ranks(self) -> list[int]:
        seen = {e.rank for e in self.logs if e.rank is not None} | set(self.system) | set(self.timing)
        return sorted(seen)

    def breakdown(self) -> dict[int, dict[str, float]]:
        """Per rank, where a step's time goes over its kept timing windows: the shares (0..1)
        of ``data``, ``compute``, ``exchange`` and ``other`` (host-to-device copy, optimizer
        step and the rest), and ``step_s`` (seconds per step).

        Time-weighted (each window counts by its steps x seconds), so the shares add up to 1
        and a long window weighs what it lasted. Empty before the first ``timing`` event."""
        out: dict[int, dict[str, float]] = {}
        for rank in sorted(self.timing):
            history = self.timing[rank]["history"]
            total = sum(w["step_s"] * w["steps"] for w in history)
            steps = sum(w["steps"] for w in history)
            if total <= 0 or steps <= 0:
                continue
            shares = {part: sum(sum(w[f] for f in fields) * w["steps"] for w in history) / total
                      for part, fields in _PARTS.items()}
            shares = {k: min(1.0, max(0.0, v)) for k, v in shares.items()}
            shares["other"] = max(0.0, 1.0 - shares["data"] - shares["compute"] - shares["exchange"])
            shares["step_s"] = total / steps
            out[rank] = shares
        return out

    def summary(self) -> str:
        """One status line: state, progress, loss, throughput, ETA."""
        parts = [self.state + (f" ({self.reason})" if self.reason and self.state != "running" else "")]
        if self.total_steps:
            parts.append(f"step {self.step}/{self.total_steps}")
        if self.epochs is not None:
            parts.append(epoch_text(self.epoch, self.epochs))
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4f}")
        if self.images_per_s:
            parts.append(f"{self.images_per_s:.1f} img/s")
        found = self.headline()
        if found is not None and found.accuracy is not None:
            parts.append(found.text())
        resumed = self.resume_text()
        if resumed:
            parts.append(resumed)
        eta = self.eta_s
        if eta is not None:
            parts.append(f"ETA {format_duration(eta)}")
        return " | ".join(parts)

    def resume_text(self) -> str | None:
        """``"resumed 2x, 14 steps lost"``: what restarts cost this run (None: never resumed)."""
        if not self.resumes:
            return None
        return f"resumed {self.resumes}x, {self.steps_lost} step{'s' if self.steps_lost != 1 else ''} lost"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view state (what the sidebar's charts read)."""
        return {
            "state": self.state, "reason": self.reason, "world_size": self.world_size, "engine": self.engine,
            "device": self.device, "step": self.step, "epoch": self.epoch, "epochs_total": self.epochs,
            "total_steps": self.total_steps,
            "progress": self.progress, "eta_s": self.eta_s, "images_per_s": self.images_per_s,
            "loss": self.loss, "lr": self.lr, "val": self.val, "test": self.test, "best": self.best,
            "headline": None if (found := self.headline()) is None else found.to_dict(),
            "end_status": self.end_status, "errors": self.errors,
            "resumes": self.resumes, "steps_lost": self.steps_lost, "resumed": self.resume_text(),
            "preempted": self.preempted,
            "series": {k: v.to_dict() for k, v in self.series.items()},
            "epochs": {k: v.to_dict() for k, v in self.epochs_hist.items()},
            "system": {str(r): {k: v.to_dict() for k, v in t.items()} for r, t in self.system.items()},
            "timing": {str(r): {k: v for k, v in t.items() if k != "history"} for r, t in self.timing.items()},
            "breakdown": {str(r): v for r, v in self.breakdown().items()},
            "lines_seen": self.lines_seen,
        }


def tail_state(job: Job, lines: int = 400) -> RunState:
    """A ``RunState`` folded from the job's status and the last ``lines`` log lines only: cheap
    enough for a table of many jobs (``%lanejobs``, the sidebar), whatever each log's length."""
    state = RunState(max_points=64, max_log_lines=50)
    try:
        state.apply_all(job.poll(None, tail_lines=lines).updates)
    except Exception:
        status = job.status()  # a finished job's is the recorded one: no backend is asked
        if not status.state.finished:
            raise
        # its log is out of reach (a cluster that is gone, no kubeconfig here): the row keeps
        # the recorded outcome and metrics rather than turning "unknown"
        state.fold_status(status)
    fill_tests(state, job.metrics)
    fill_config(state, job)
    return state


def fill_tests(state: RunState, metrics: dict[str, Any] | None) -> None:
    """The test figures of ``metrics.json`` (``job.metrics``) where the log gave none (a tail
    of a long log, a log without eval events): the headline is then the same as the file's."""
    found = from_metrics(metrics)
    if found is None:
        return
    for fig in (found.primary, found.other):
        if fig is not None and fig.model not in state.tests:
            state.tests[fig.model] = fig
    if state.test is None:
        p = found.primary
        state.test = {"accuracy": p.accuracy, "fp": p.fp, "fn": p.fn, "frames": p.frames,
                      "model": "best" if p.model == BEST else "last"}


def fill_config(state: RunState, job: Job) -> None:
    """The loader and batch settings from the job's spec where the log gave none (a tail of a
    long log has no start event; a start event's config wins when it comes): the doctor's
    advice names them ("loader workers 2 -> try 6"), the same on every face."""
    spec = getattr(job, "spec", None)
    workers = getattr(spec, "num_workers", None)
    if isinstance(workers, int) and not isinstance(workers, bool):
        state.config.setdefault("num_workers", workers)
        state.config.setdefault("use_workers", workers > 0)
    batch = getattr(spec, "batch_size", None)
    if isinstance(batch, int) and not isinstance(batch, bool):
        state.config.setdefault("batch_size", batch)


# the four parts a step is shown as (charts, the doctor): the rest of the timing fields are "other"
_PARTS = {"data": ("data_s",), "compute": ("compute_s",), "exchange": ("exchange_s",),
          "other": ("h2d_s", "optimizer_s", "other_s")}


def _seconds(value: Any) -> float | None:
    """A non-negative finite number of seconds, else None (non-finite values arrive as null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return max(0.0, float(value))


def loader_workers(config: Mapping[str, Any]) -> int | None:
    """The loader workers a rank ran with (``--num-workers`` counts only with workers on)."""
    workers = config.get("num_workers")
    if not isinstance(workers, int) or isinstance(workers, bool):
        return None
    use = config.get("use_workers")
    return workers if use is None or use else 0


def changed_settings(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """The ``SETTINGS`` whose value differs between two launches' configs, as ``(setting, old,
    new)``: what a resume changed (``job.resume(num_workers=6)``, the sidebar's Apply button).
    A setting unknown on either side is no change."""
    out = []
    for name in SETTINGS:
        old, new = ((loader_workers(c) if name == "num_workers" else c.get(name)) for c in (before, after))
        if old is not None and new is not None and old != new:
            out.append((name, old, new))
    return out


