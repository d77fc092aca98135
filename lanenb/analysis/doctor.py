"""The doctor: "why is my run slow?" answered from the run's own step timing, while it runs.

Every rank reports where its steps' time goes (``timing`` events, docs/EVENTS.md: waiting for
data, host-to-device copy, compute, waiting in the gradient all-reduce, optimizer step);
``RunState`` keeps each rank's last windows. ``diagnose(state)`` turns them into one
``Verdict``: the bottleneck, its number and the action that helps, e.g.
``input-bound: ranks wait 41% of each step for data; loader workers 2 -> try 6, or put the
dataset on faster storage``. Every face (live view, ``%lanejobs``, ``lanenb jobs show``, the
sidebar, ``%lanescale``) shows this one verdict, so they never disagree.

Pure: the verdict depends on the state alone (no clock, no I/O), so a finished job's log
gives the same verdict as the live run did at its end.

One cause is named, in this order, because an earlier cause produces the later symptoms:

1. ``straggler``: one rank is slow, so every other rank waits for it in the all-reduce;
   this also inflates the others' exchange share, hence before ``exchange-bound``, and a
   rank slow at loading its own shard is a straggler, not a run-wide input problem.
2. ``input-bound``: ranks wait for the next batch (the loader or the storage is too slow).
3. ``exchange-bound``: the all-reduce itself is slow (network, too many small ranks).
4. ``gpu-underused``: nothing waits on data or exchange, yet a GPU is idle much of the time.
5. ``healthy``: compute dominates; ``unknown`` before enough timing arrived.

Smoothing: a cause is named only when its condition held in ``PERSIST`` of the last ``JUDGED``
full windows (aligned by step across ranks), so one slow window (a GC pause, a cold cache at
start-up) is not a verdict; windows shorter than ``SHORT_WINDOW`` of the usual (the flush at an
epoch's end, the steps after a validation pause) are not judged at all.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from lanenb.analysis.runstate import SETTINGS, TIMING_HISTORY, changed_settings, loader_workers
from lanenb.charts.vocabulary import verdict_severity

if TYPE_CHECKING:
    from lanenb.analysis.runstate import RunState

__all__ = ["Verdict", "diagnose", "shown_verdict", "suggest_workers", "KINDS", "INPUT_SHARE", "STRAGGLER_RATIO",
           "STRAGGLER_WAIT", "EXCHANGE_SHARE", "GPU_UTIL_LOW", "GPU_MIN_SAMPLES", "PERSIST", "HELPED_DROP",
           "change_effect"]

KINDS = ("input-bound", "straggler", "exchange-bound", "gpu-underused", "healthy", "unknown")

# A rank waiting a quarter of every step for its next batch loses more than any exchange
# tuning could win back; a loader that keeps up (prefetching workers) holds the wait near 0,
# so 25% is far above noise yet catches a loader at a fraction of the speed it needs.
INPUT_SHARE = 0.25
# Ranks doing the same work differ by a few per cent (shard sizes, clock boost, which rank
# logs); 25% more busy time per step than the others is beyond that and costs every other
# rank the same time in each all-reduce.
STRAGGLER_RATIO = 1.25
# The others must spend at least half of the slow rank's extra time waiting in the exchange:
# proof that they wait for it (a synchronous all-reduce), not a skew in how ranks measure.
STRAGGLER_WAIT = 0.5
# Data-parallel runs that scale well spend 5-20% in the all-reduce; at 30% the exchange costs
# nearly a third of the hardware, so a bigger per-rank batch or fewer hosts pays off.
EXCHANGE_SHARE = 0.30
# NVML utilisation is the share of time a kernel runs; a fed GPU on SCNN sits above 90%
# (the RUN:AI guide reports > 96%); under 70% a third of the GPU is idle.
GPU_UTIL_LOW = 70.0
# system samples (2 s apart by default) needed for a utilisation verdict: one sample can
# land in a checkpoint write
GPU_MIN_SAMPLES = 3
# of the last TIMING_HISTORY windows, how many must show a cause: 2 of 3 ignores one
# odd window (start-up, a hiccup) yet names a lasting cause two windows after it begins
PERSIST = 2
# the windows judged: the latest JUDGED full ones of the kept history
JUDGED = 3
# a window of fewer than this share of the run's usual steps per window (the flush at an epoch's
# end, the first steps after a validation pause, the steps before --max-steps) is too short to
# judge: one slow step in it would weigh as much as ten in a full window
SHORT_WINDOW = 0.5
# worker advice: enough workers to load a batch in the time the rank computes one, with
# headroom for uneven batches (1.5x); more than MAX_WORKERS rarely helps (the storage is the limit)
WORKER_HEADROOM = 1.5
MAX_WORKERS = 16
# after a resume that changed a setting, it "helped" when the share of the step it targets fell
# by at least this much (absolute): windows of one steady run differ by a few points (a GC
# pause, a cold cache), so a smaller drop is not told apart from noise
HELPED_DROP = 0.05
# what each changed setting is judged by: the part of a step it should shrink (RunState's
# breakdown parts) and its words; more workers hide the data wait, a larger per-rank batch
# exchanges gradients less often per image
_JUDGED_BY = {"num_workers": ("data_s", "data wait"), "batch_size": ("exchange_s", "gradient exchange")}


@dataclass(frozen=True)
class Verdict:
    """The run's bottleneck in words: ``str(verdict)`` is one line starting with ``kind``.

    Args:
        kind: one of ``KINDS``.
        message: what was measured, with its number ("ranks wait 41% of each step for data");
            after a resume that changed a setting, then whether that helped (``change_effect``).
        action: what helps ("loader workers 2 -> try 6, ..."); empty for healthy/unknown.
        rank: the rank named (straggler, gpu-underused).
        host: that rank's host.
        value: the number behind the verdict: a share 0..1 (input-bound, exchange-bound,
            healthy: compute share), a ratio (straggler) or a percentage (gpu-underused).
        change: the advice as a setting a resume can apply, ``{"setting": "num_workers",
            "value": 6}`` (``job.resume(num_workers=6)``; the sidebar's "Apply" button); None
            when the advice is not one setting of the job.
    """

    kind: str
    message: str
    action: str = ""
    rank: int | None = None
    host: str | None = None
    value: float | None = None
    change: dict[str, Any] | None = None

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" + (f"; {self.action}" if self.action else "")

    @property
    def severity(self) -> str:
        """``ok``, ``warn``, ``error`` or ``muted`` (lanenb.charts.vocabulary): the colour every
        face gives this verdict."""
        return verdict_severity(self.kind)

    def to_dict(self) -> dict[str, Any]:
        """JSON for the server and the sidebar: the fields plus ``line`` (``str(self)``) and
        ``severity``."""
        return {**asdict(self), "line": str(self), "severity": self.severity}


Window = Mapping[int, Mapping[str, Any]]  # rank -> one timing window (docs/EVENTS.md fields)


def diagnose(state: RunState) -> Verdict:
    """The verdict for ``state``'s latest timing windows (see the module docstring)."""
    windows = _aligned_windows(state)
    if not windows:
        return Verdict("unknown", "no step timing yet")
    if len(windows) < PERSIST:
        return Verdict("unknown", f"measuring: {len(windows)} timing window so far, a verdict needs {PERSIST}")
    verdict = next((v for rule in (_straggler, _input_bound, _exchange_bound, _gpu_underused)
                    if (v := rule(state, windows)) is not None), None) or _healthy(windows)
    effect = change_effect(state, windows)
    return verdict if effect is None else replace(verdict, message=f"{verdict.message}; {effect}")


def change_effect(state: RunState, windows: Sequence[Window] | None = None) -> str | None:
    """After a resume that changed a setting (``SETTINGS``: the new launch's ``start`` config
    against the launch before, e.g. the sidebar's Apply button), whether it helped, in one clause:
    ``after loader workers 2 -> 6: data wait 41% -> 6% of step time (helped)``. The old launch's
    judged windows (``RunState.previous_launch``) against the new launch's; None when no setting
    changed, or either launch has fewer than ``PERSIST`` full windows.

    Args:
        windows: the new launch's judged windows (``diagnose`` passes its own), else read from ``state``.
    """
    before = state.previous_launch
    if not before:
        return None
    changes = changed_settings(before.get("config") or {}, state.config)
    if not changes:
        return None
    new = _aligned_windows(state) if windows is None else list(windows)
    old = _aligned(before.get("timing") or {})
    if len(new) < PERSIST or len(old) < PERSIST:
        return None
    setting = changes[0][0]
    part, words = _JUDGED_BY[setting]
    was, now = (_mean([_mean([_share(w, part) for w in window.values()]) for window in side]) for side in (old, new))
    what = ", ".join(f"{SETTINGS[name]} {a} -> {b}" for name, a, b in changes)
    verdict = "helped" if was - now >= HELPED_DROP else "did not help"
    return f"after {what}: {words} {was:.0%} -> {now:.0%} of step time ({verdict})"


def shown_verdict(state: RunState) -> Verdict | None:
    """The verdict a view shows for ``state``, or None: the one rule of every face (live view,
    ``%lanejobs``, the sidebar's list and job panel).

    A named cause or ``healthy`` always shows; ``unknown`` shows only while the ranks report
    step timing ("measuring: 1 timing window so far": a verdict is coming); a run that never
    reported timing (not started yet, ``--timing-every 0``, a program that is not the trainer)
    shows nothing rather than "unknown: no step timing yet".
    """
    verdict = diagnose(state)
    if verdict.kind != "unknown":
        return verdict
    timing_off = state.config.get("timing_every") == 0
    return verdict if state.timing and not timing_off else None


# ---------------------------------------------------------------------------- windows
def _aligned_windows(state: RunState) -> list[dict[int, Mapping[str, Any]]]:
    """The last windows as {rank: window}, oldest first: windows of the same steps across ranks
    (every rank reports at the same steps), else the i-th latest of each rank (a rank far
    behind, or steps missing)."""
    return _aligned({r: e["history"] for r, e in state.timing.items() if e.get("history")})


def _aligned(histories: Mapping[int, Sequence[Mapping[str, Any]]]) -> list[dict[int, Mapping[str, Any]]]:
    """``_aligned_windows`` of per-rank window histories (this launch's, or the one before)."""
    if not histories:
        return []
    by_step = {r: {w["step"]: w for w in h if isinstance(w.get("step"), int)} for r, h in histories.items()}
    common = sorted(set.intersection(*(set(s) for s in by_step.values())))
    shortest = min(len(h) for h in histories.values())
    if len(common) >= min(PERSIST, shortest):
        aligned = [{r: by_step[r][step] for r in sorted(by_step)} for step in common[-TIMING_HISTORY:]]
    else:
        n = min(shortest, TIMING_HISTORY)
        aligned = [{r: histories[r][len(histories[r]) - n + i] for r in sorted(histories)} for i in range(n)]
    return _full_windows(aligned)[-JUDGED:]


def _full_windows(aligned: list[dict[int, Mapping[str, Any]]]) -> list[dict[int, Mapping[str, Any]]]:
    """``aligned`` without the windows too short to judge (``SHORT_WINDOW``)."""
    def steps(window: Mapping[int, Mapping[str, Any]]) -> int:
        return min(int(w.get("steps") or 0) for w in window.values())

    usual = max((steps(window) for window in aligned), default=0)
    return [window for window in aligned if steps(window) >= SHORT_WINDOW * usual]


def _share(window: Mapping[str, Any], name: str) -> float:
    step = float(window["step_s"])
    return min(1.0, max(0.0, float(window.get(name) or 0.0) / step)) if step > 0 else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _held(values: Sequence[float | None]) -> list[float]:
    """The values of the windows where a condition held (None: it did not)."""
    return [v for v in values if v is not None]


# ---------------------------------------------------------------------------- rules
def _slow_rank(window: Window) -> tuple[int, float] | None:
    """The straggler of one window: (rank, its busy time over the others' median), or None."""
    if len(window) < 2:
        return None
    busy = {r: max(0.0, float(w["step_s"]) - float(w.get("exchange_s") or 0.0)) for r, w in window.items()}
    slow = max(busy, key=lambda r: busy[r])
    others = [r for r in busy if r != slow]
    base = statistics.median(busy[r] for r in others)
    if base <= 0 or busy[slow] < STRAGGLER_RATIO * base:
        return None
    waited = statistics.median(float(window[r].get("exchange_s") or 0.0) for r in others)
    if waited < STRAGGLER_WAIT * (busy[slow] - base):
        return None
    return slow, busy[slow] / base


def _straggler(state: RunState, windows: Sequence[Window]) -> Verdict | None:
    found = [_slow_rank(w) for w in windows]
    counts: dict[int, list[float]] = {}
    for item in found:
        if item is not None:
            counts.setdefault(item[0], []).append(item[1])
    rank = next((r for r, ratios in counts.items() if len(ratios) >= PERSIST), None)
    if rank is None:
        return None
    ratio = _mean(counts[rank])
    host = state.hosts.get(rank) or state.timing.get(rank, {}).get("host")
    own = [w[rank] for w in windows]
    busy = sum(float(w["step_s"]) - float(w.get("exchange_s") or 0.0) for w in own) or 1.0
    data = sum(float(w.get("data_s") or 0.0) for w in own) / busy
    where = f"host {host}" if host else f"rank {rank}'s machine"
    cause = (f"its time goes to waiting for data ({data:.0%} of its busy time): its storage or loader"
             if data >= INPUT_SHARE else
             "other processes, a CPU quota or affinity on that rank, a slower or throttled GPU")
    return Verdict("straggler",
                   f"rank {rank} is a straggler: its steps take {ratio:.1f}x the others' and every all-reduce "
                   f"waits for it" + (f" (host {host})" if host else ""),
                   f"look at {where}: {cause}", rank=rank, host=host, value=ratio)


def suggest_workers(workers: int, data_share: float) -> int:
    """Loader workers that would hide a data wait of ``data_share`` of each step.

    A worker needs ``L`` seconds per batch; with ``w`` workers the rank waits until
    ``L / w = step time``, so ``L = w x step``; hiding it needs ``L / busy`` workers, busy =
    the step without the wait. With no workers (loading in the rank) ``L`` is the wait itself.
    Headroom ``WORKER_HEADROOM``; at least one more than now, at most ``MAX_WORKERS``."""
    busy = max(1.0 - data_share, 0.05)
    need = (workers / busy) if workers > 0 else (data_share / busy)
    return int(min(MAX_WORKERS, max(workers + 1, 2, math.ceil(need * WORKER_HEADROOM - 1e-9))))


def _input_bound(state: RunState, windows: Sequence[Window]) -> Verdict | None:
    shares = [_mean([_share(w, "data_s") for w in window.values()]) for window in windows]
    held = _held([s if s >= INPUT_SHARE else None for s in shares])
    if len(held) < PERSIST:
        return None
    share = _mean(held)
    workers = loader_workers(state.config)
    change = None
    if workers is None:
        action = "more loader workers (--num-workers), or put the dataset on faster storage"
    elif workers >= MAX_WORKERS:
        action = f"loader workers {workers} already: put the dataset on faster storage (local disk, RAM)"
    else:
        target = suggest_workers(workers, share)
        action = (f"loader workers {workers} -> try {target} (--num-workers {target}), "
                  f"or put the dataset on faster storage")
        change = {"setting": "num_workers", "value": target}
    return Verdict("input-bound", f"ranks wait {share:.0%} of each step for data", action, value=share,
                   change=change)


def _exchange_bound(state: RunState, windows: Sequence[Window]) -> Verdict | None:
    shares = [statistics.median(_share(w, "exchange_s") for w in window.values())
              if _slow_rank(window) is None else None for window in windows]
    held = _held([s if s is not None and s >= EXCHANGE_SHARE else None for s in shares])
    if len(held) < PERSIST:
        return None
    share = _mean(held)
    batch = state.config.get("batch_size") or state.batch_size
    bigger = (f"larger per-rank batch (--batch-size {batch} -> {2 * batch})" if isinstance(batch, int) and batch > 0
              else "larger per-rank batch")
    hosts = {state.hosts.get(r) for r in windows[-1]} - {None}
    fewer = f"fewer, fuller nodes (now {len(hosts)} hosts)" if len(hosts) > 1 else "fewer, fuller nodes"
    return Verdict("exchange-bound", f"{share:.0%} of each step is gradient exchange", f"{bigger} or {fewer}",
                   value=share)


def _gpu_underused(state: RunState, windows: Sequence[Window]) -> Verdict | None:
    """A GPU rank whose utilisation, over the time the kept windows cover, is under
    ``GPU_UTIL_LOW`` (mean of its raw samples, at least ``GPU_MIN_SAMPLES`` of them)."""
    low: list[tuple[float, int]] = []
    for rank, samples in state.gpu_recent.items():
        first = windows[0].get(rank)
        if first is None:
            continue
        since = float(first["t"]) - float(first["step_s"]) * int(first["steps"])
        values = [u for t, u in samples if t >= since]
        if len(values) >= GPU_MIN_SAMPLES and _mean(values) < GPU_UTIL_LOW:
            low.append((_mean(values), rank))
    if not low:
        return None
    util, rank = min(low)
    host = state.hosts.get(rank)
    parts = [(_mean([_share(w[rank], f) for w in windows if rank in w]), name)
             for f, name in (("h2d_s", "host-to-device copy"), ("optimizer_s", "optimizer step"),
                             ("other_s", "other host work"))]
    share, name = max(parts)
    hint = f" ({name} takes {share:.0%} of each step)" if share >= 0.1 else ""
    batch = state.config.get("batch_size") or state.batch_size
    bigger = f"a larger per-rank batch (--batch-size {batch} -> {2 * batch})" if isinstance(batch, int) and batch > 0 \
        else "a larger per-rank batch"
    return Verdict("gpu-underused", f"GPU utilisation {util:.0f}% on rank {rank}" + (f" (host {host})" if host else "")
                   + hint, f"give the GPU more work per launch: {bigger}, mixed precision, or fewer ranks per GPU",
                   rank=rank, host=host, value=util)


def _healthy(windows: Sequence[Window]) -> Verdict:
    def mean_share(name: str) -> float:  # the median window, as the rules judge: one odd window aside
        return statistics.median(_mean([_share(w, name) for w in window.values()]) for window in windows)

    compute, data, exchange = mean_share("compute_s"), mean_share("data_s"), mean_share("exchange_s")
    return Verdict("healthy", f"compute {compute:.0%} of each step (data {data:.0%}, exchange {exchange:.0%})",
                   value=compute)
