"""What a finished run amounts to for an experiment tracker: params, metric series, tags, files.

Read from the run itself, not from a live view: rank 0's ``events.jsonl`` in the run dir (every
event it emitted, unbounded) or, when the run dir is not on this machine (a Kubernetes job whose
PVC is not mounted here), the job's log through ``Job.events()``. The metric names are the
TensorBoard tags (``train/loss``, ``val/accuracy``, ``test/accuracy``, ``test_best/accuracy``),
so the two trackers read alike; the headline (``accuracy``/``fp``/``fn``) is the figure every
lanenb face shows, labelled with its model (``lanenb.analysis.headline``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanenb.analysis.headline import BEST, LAST, Headline, choose, figure, from_metrics
from lanenb.contract.redact import redact_spec, redact_text
from lanenb.jobs import Job
from lanenb_trainer.events import PREFIX, Event, parse_line

__all__ = ["Metric", "RunRecord", "run_record", "CHECKPOINTS"]

# which checkpoint stands for the model: the headline's (best.pt), else the last one
CHECKPOINTS = ("best.pt", "last.pt")
_STEP = ("loss", "seg_loss", "exist_loss", "lr", "images_per_s", "step_time_s")
_EPOCH = ("train_loss", "images_per_s", "duration_s")
_VAL = ("accuracy", "fp", "fn", "loss", "latency_ms_p50", "latency_ms_p95")
_TEST = ("accuracy", "fp", "fn")
# spec fields that are the trainer config's under another name, or bookkeeping
_SPEC_SKIP = ("name", "run_dir", "extra_args")


@dataclass(frozen=True)
class Metric:
    """One point of a metric series: ``key`` at global ``step``, ``timestamp`` in ms."""

    key: str
    value: float
    step: int
    timestamp: int


@dataclass
class RunRecord:
    """A run, ready for a tracker.

    ``params`` are strings (the trainer config, then ``spec.*`` for the launch settings, secret
    values redacted); ``metrics`` the series in event order; ``artifacts`` (local file, folder in
    the tracker) what exists on this machine; ``notes`` what was left out and why.
    """

    name: str
    state: str
    params: dict[str, str] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: list[tuple[Path, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    headline: Headline | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    source: str = ""


def _param(value: Any) -> str:
    """A param's text, secrets redacted: a URL with userinfo or a token in the trainer's config
    (``config.json``) would otherwise be uploaded to the tracking server in clear."""
    return redact_text(value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str))


def _points(prefix: str, ev: Event, names: Iterable[str]) -> Iterator[Metric]:
    step = ev.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return
    for name in names:
        value = ev.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            yield Metric(f"{prefix}/{name}", float(value), step, int(ev.t * 1000))


def _read_events(job: Job) -> tuple[list[Event], str]:
    """Rank 0's events: its ``events.jsonl`` when the run dir is here, else the job's log."""
    path = Path(job.run_dir) / "events.jsonl" if job.run_dir else None
    if path is not None and path.is_file():
        with path.open(encoding="utf-8") as fh:
            found = [ev for line in fh if (ev := parse_line(PREFIX + line)) is not None]
        return found, str(path)
    return [ev for ev in job.events() if ev.rank == 0], f"the {job.backend_name} job's log"


def _headline(metrics: Mapping[str, Any] | None, events: list[Event]) -> Headline | None:
    """metrics.json's rule (``job.metrics``), or the same rule over the test events."""
    found = from_metrics(metrics)
    if found is not None:
        return found
    tests = {ev.get("model"): ev for ev in events if ev.kind == "eval" and ev.get("split") == "test"}
    last, best = tests.get("last"), tests.get("best")
    last_epoch = last.get("epoch") if last is not None else None
    return choose(figure(LAST, last.data if last else None,
                         last_epoch - 1 if isinstance(last_epoch, int) else None),
                  figure(BEST, best.data if best else None, best.get("epoch") if best else None))


def run_record(job: Job) -> RunRecord:
    """Everything a tracker gets from ``job`` (which must have ended: ``to_mlflow`` checks).

    Args:
        job: a finished job.

    Returns:
        A ``RunRecord``: params from the resolved trainer config (``config.json`` or the
        ``start`` event) and the spec, metric series from the events, the headline, and the
        checkpoint (``best.pt``, else ``last.pt``), ``config.json`` and ``metrics.json`` when the
        run dir is on this machine.
    """
    status = job.status()
    events, source = _read_events(job)
    rec = RunRecord(name=job.name, state=status.state.value, source=source)
    run_dir = Path(job.run_dir) if job.run_dir else None
    local = run_dir is not None and run_dir.is_dir()

    start = next((ev for ev in events if ev.kind == "start"), None)
    config: Mapping[str, Any] = {}
    if local and run_dir is not None and (run_dir / "config.json").is_file():
        config = json.loads((run_dir / "config.json").read_text())
    elif start is not None and isinstance(start.get("config"), Mapping):
        config = {**start["config"], "world_size": start.get("world_size"), "engine": start.get("engine")}
    rec.params = {k: _param(v) for k, v in config.items() if v is not None}
    spec = redact_spec(job.spec.to_dict())
    rec.params.update({f"spec.{k}": _param(v) for k, v in spec.items()
                       if k not in _SPEC_SKIP and v not in (None, [], {}, "")})

    for ev in events:
        if ev.kind == "step":
            rec.metrics.extend(_points("train", ev, _STEP))
        elif ev.kind == "epoch":
            rec.metrics.extend(_points("epoch", ev, _EPOCH))
        elif ev.kind == "eval" and ev.get("split") == "val":
            rec.metrics.extend(_points("val", ev, _VAL))
        elif ev.kind == "eval" and ev.get("split") == "test":
            rec.metrics.extend(_points("test_best" if ev.get("model") == "best" else "test", ev, _TEST))

    rec.headline = _headline(job.metrics, events)
    last_step = max((m.step for m in rec.metrics), default=0)
    end_t = max((ev.t for ev in events), default=None)
    if rec.headline is not None:
        h = rec.headline.primary
        for key, value in (("accuracy", h.accuracy), ("fp", h.fp), ("fn", h.fn)):
            if value is not None:
                rec.metrics.append(Metric(key, value, last_step, int((end_t or 0) * 1000)))
        rec.tags["lanenb.headline"] = rec.headline.text()
        rec.tags["lanenb.headline_model"] = rec.headline.label

    rec.start_ms = int(events[0].t * 1000) if events else (int(job.created * 1000) if job.created else None)
    rec.end_ms = int(end_t * 1000) if end_t else None
    rec.tags.update({"lanenb.job": job.name, "lanenb.backend": job.backend_name, "lanenb.state": rec.state,
                     "lanenb.events": source})
    if job.run_dir:
        rec.tags["lanenb.run_dir"] = job.run_dir
    if status.reason:
        rec.tags["lanenb.reason"] = redact_text(status.reason)[:5000]

    if local and run_dir is not None:
        for name in ("config.json", "metrics.json"):
            if (run_dir / name).is_file():
                rec.artifacts.append((run_dir / name, ""))
        ckpt = next((run_dir / "checkpoints" / n for n in CHECKPOINTS if (run_dir / "checkpoints" / n).is_file()),
                    None)
        if ckpt is not None:
            rec.artifacts.append((ckpt, "checkpoints"))
        else:
            rec.notes.append(f"no checkpoint in {run_dir / 'checkpoints'}")
    else:
        rec.notes.append(f"run dir {job.run_dir} is not on this machine: no checkpoint or files logged "
                         f"(mount the job's PVC here, or copy the run dir, then export again)")
    if not events:
        rec.notes.append(f"no events found in {source}")
    return rec
