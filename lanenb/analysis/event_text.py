"""Events in words: the one-line summary of each ``@lanenb`` event kind.

Shared by the console (``lanenb train``) and the notebook's log pane (through ``RunState``),
so a run reads the same wherever it is watched. Epochs read as people count them, from 1
(``lanenb_trainer.epochs``): the events' ``epoch`` is a 0-based index.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lanenb_trainer.epochs import epoch_text
from lanenb_trainer.events import Event

__all__ = ["event_text"]


def _start(ev: Event) -> str:
    resumed = f", resumed at step {ev['resumed_from']['step']}" if ev.get("resumed_from") else ""
    return (f"start: engine {ev.get('engine')}, {ev.get('world_size')} ranks, device {ev.get('device')}, "
            f"{ev.get('threads')} threads, {ev.get('train_frames')} train / {ev.get('val_frames')} val / "
            f"{ev.get('test_frames')} test frames, {ev.get('steps_per_epoch')} steps/epoch{resumed}")


def _step(ev: Event) -> str:
    total = f"/{ev.get('total_steps')}" if ev.get("total_steps") else ""
    return (f"{epoch_text(ev.get('epoch'))} step {ev.get('step')}{total} loss {ev.get('loss') or 0:.4f} "
            f"lr {ev.get('lr') or 0:.2e} {ev.get('images_per_s') or 0:.1f} img/s")


def _epoch(ev: Event) -> str:
    val = (f", val acc {ev['val_accuracy']:.4f} fp {ev['val_fp']:.4f} fn {ev['val_fn']:.4f}"
           if ev.get("val_accuracy") is not None else "")
    return (f"{epoch_text(ev.get('epoch'), ev.get('epochs'))} done in {ev.get('duration_s') or 0:.1f}s: "
            f"train loss {ev.get('train_loss') or 0:.4f}{val}")


def _eval(ev: Event) -> str:
    model = {"best": " (best.pt)", "last": " (last model)"}.get(ev.get("model"), "")
    return (f"{ev.get('split')}{model} accuracy {ev.get('accuracy') or 0:.4f} fp {ev.get('fp') or 0:.4f} "
            f"fn {ev.get('fn') or 0:.4f} ({ev.get('frames')} frames)")


def _checkpoint(ev: Event) -> str:
    return f"checkpoint {'best ' if ev.get('best') else ''}{ev.get('path')} (step {ev.get('step')})"


def _system(ev: Event) -> str:
    gpu = (f" gpu {ev.get('gpu_util')}% {ev.get('gpu_mem_mb')} MiB {ev.get('gpu_temp_c')}C"
           if ev.get("gpu_util") is not None else "")
    return f"system: cpu {ev.get('cpu_percent')}% rss {ev.get('rss_mb')} MiB{gpu}"


def _timing(ev: Event) -> str:
    step_s = ev.get("step_s") or 0.0

    def share(name: str) -> str:
        value = ev.get(name)
        return f"{(value or 0.0) / step_s:.0%}" if step_s > 0 and isinstance(value, (int, float)) else "-"

    pause = f", paused {ev.get('pause_s'):.1f}s ({', '.join(ev.get('pause'))})" if ev.get("pause") else ""
    return (f"timing: step {ev.get('step')} ({ev.get('steps')} steps) {step_s:.3g} s/step on {ev.get('host')}: "
            f"data {share('data_s')} h2d {share('h2d_s')} compute {share('compute_s')} "
            f"exchange {share('exchange_s')} optimizer {share('optimizer_s')}{pause}")


def _error(ev: Event) -> str:
    tb = ev.get("traceback") or ""
    return f"ERROR {ev.get('type')}: {ev.get('message')}" + (f"\n{tb.rstrip()}" if tb else "")


def _end(ev: Event) -> str:
    return f"end: {ev.get('status')} after {ev.get('duration_s') or 0:.1f}s, step {ev.get('step')}"


def _log(ev: Event) -> str:
    return str(ev.get("message"))


def _preempted(ev: Event) -> str:
    ranks = ev.get("ranks") or []
    who = f"rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks))}" if ranks else "a rank"
    where = (f"every rank stopped at step {ev.get('step')} ({epoch_text(ev.get('epoch'))}) with a checkpoint "
             f"written in {ev.get('checkpoint_s') or 0:.2f}s")
    if ev.get("reason") == "suspended":
        return f"suspended by the user: {where}"
    return f"preempted: {ev.get('signal') or 'SIGTERM'} to {who}; {where}"


_AFTER = {"suspended": "after a suspend", "cancelled": "after a cancel", "preempted": "after a preemption"}


def _resumed(ev: Event) -> str:
    how = (_AFTER.get(ev.get("after") or "preempted", "after a preemption") if ev.get("preempted")
           else "after an interruption")
    lost = ev.get("steps_lost") or 0
    total = ev.get("steps_lost_total") or 0
    return (f"resumed ({ev.get('count')}x) {how} from step {ev.get('step')} ({epoch_text(ev.get('epoch'))}): "
            f"{lost} step{'s' if lost != 1 else ''} lost" + (f", {total} in all" if total != lost else "")
            + _resized(ev.get("resized")))


def _resized(r: Any) -> str:
    """``, resized 2 -> 1 ranks (2 micro-batches per step)`` for a resume on another size."""
    if not isinstance(r, dict):
        return ""
    how = (f"LR rule {r.get('lr_rule')}" if r.get("lr_rule") else
           f"{r.get('accumulation')} micro-batch{'es' if r.get('accumulation') != 1 else ''} per step")
    return f", resized {r.get('from')} -> {r.get('to')} ranks ({how})"


_TEXT: dict[str, Callable[[Event], str]] = {
    "start": _start, "step": _step, "epoch": _epoch, "eval": _eval, "checkpoint": _checkpoint,
    "system": _system, "timing": _timing, "error": _error, "end": _end, "log": _log,
    "preempted": _preempted, "resumed": _resumed,
}


# periodic measurements of every rank: charted (system samples) or turned into the per-rank
# breakdown and the doctor's verdict (timing windows), not logged line by line
PERIODIC = frozenset({"system", "timing"})


def event_text(ev: Event, *, system: bool = False) -> str | None:
    """One line (an error keeps its traceback lines) for ``ev``; ``None`` for ``system``
    samples and ``timing`` windows unless ``system`` (they arrive every few seconds per rank
    and are shown as charts, the step breakdown and the verdict anyway)."""
    if ev.kind in PERIODIC and not system:
        return None
    fmt = _TEXT.get(ev.kind)
    if fmt is None:
        return f"{ev.kind}: " + " ".join(f"{k}={json.dumps(v, default=str)}" for k, v in ev.data.items())
    return fmt(ev)
