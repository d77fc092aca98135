"""Where each training step's time goes, on this rank: the ``timing`` event (docs/EVENTS.md).

Why: when a run is slow, throughput alone does not say whether the ranks wait for data, for the
gradient exchange, for a straggler or for nothing. The loop and the engines *lap* the phases of
every step (data wait, host-to-device copy, compute, exchange wait, optimizer step) and every
``--timing-every`` steps :class:`StepTimer` emits the per-step means over that window as one
``timing`` event, which the notebook side folds into its verdict.

Cheap enough to stay on: a lap is one clock read and one list append (CPU), or one recorded
CUDA event (GPU: asynchronous work is timed on the device, where it runs); the CUDA events are
read once per window, after one synchronize, never per step. ``bench/step_timing.py`` measures
the cost against ``--timing-every 0`` (:class:`NullTimer`).

Pauses (validation, checkpoints) happen between steps; their time is taken out of the step
that contains them and reported, summed, as ``pause_s`` on the next ``timing`` event.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

__all__ = ["PHASES", "HostClock", "CudaClock", "StepTimer", "NullTimer", "make_step_timer"]

# The measured phases, in the order a step runs them; ``other`` is what is left of the step.
PHASES = ("data", "h2d", "compute", "exchange", "optimizer")


class Clock(Protocol):
    """Where the device phases are timed: a mark is a point on the device's timeline."""

    def mark(self) -> Any:
        """A new mark, now (on the device's stream for CUDA)."""

    def remark(self, mark: Any) -> Any:
        """Move ``mark`` to now, reusing it (one mark per step however often it moves)."""

    def settle(self) -> None:
        """Wait until every mark of the window is on the timeline (the one sync per window)."""

    def elapsed(self, start: Any, end: Any) -> float:
        """Seconds between two settled marks."""

    def recycle(self) -> None:
        """The window's marks have been read: their storage may be reused."""


class HostClock:
    """Marks are ``perf_counter`` readings: on a CPU rank the work runs where the host waits."""

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now

    def mark(self) -> float:
        return self.now()

    def remark(self, mark: Any) -> float:
        return self.now()

    def settle(self) -> None:
        pass

    def elapsed(self, start: float, end: float) -> float:
        return end - start

    def recycle(self) -> None:
        pass


class CudaClock:
    """Marks are CUDA events recorded on the calling thread's current stream, from a pool that
    is reused every window: kernels run after the host queues them, so only events on the
    stream say when the copy, the backward pass or the wait for the all-reduce really ran."""

    def __init__(self) -> None:
        import torch

        self._new_event = lambda: torch.cuda.Event(enable_timing=True)
        self._pool: list[Any] = []
        self._used = 0

    def mark(self) -> Any:
        if self._used == len(self._pool):
            self._pool.append(self._new_event())
        event = self._pool[self._used]
        self._used += 1
        event.record()
        return event

    def remark(self, mark: Any) -> Any:
        mark.record()
        return mark

    def settle(self) -> None:
        if self._used:
            self._pool[self._used - 1].synchronize()

    def elapsed(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1000.0

    def recycle(self) -> None:
        self._used = 0


class StepTimer:
    """Accumulates one rank's step phases and emits a ``timing`` event per window.

    Per step, in order: :meth:`lap_data` when the loader's batch arrived, :meth:`lap` after each
    device phase (``h2d``, then the engine's ``compute``/``exchange``/``optimizer``, see
    :class:`lanenb_trainer.engines.base.PhaseTimer`), :meth:`end_step` when the step is done.
    A step lasts from the end of the previous one to its own end, pauses excluded.

    Args:
        emit: the rank's event writer (``EventLog``), called as ``emit("timing", **fields)``.
        every: steps per window (``--timing-every``, > 0; 0 is :class:`NullTimer`).
        host: this rank's host name; device: its device (``cpu``, ``cuda:0``).
        clock: where device phases are timed (:class:`HostClock` on CPU, :class:`CudaClock`).
        now: the host clock (the data wait and the step's wall time are host times).
    """

    def __init__(self, emit: Callable[..., None], *, every: int, host: str, device: str,
                 clock: Clock | None = None, now: Callable[[], float] = time.perf_counter) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1 (0 is NullTimer), got {every}")
        self._emit = emit
        self.every = every
        self.host = host
        self.device = device
        self._now = now
        self._clock: Clock = clock if clock is not None else HostClock(now)
        self._step_start: float | None = None  # host time the current step began, pauses shifted
        self._prev: Any = None  # the device mark that ends the last lapped phase
        self._launch: Any = None  # the last exchange launch of this step (DDP's hook)
        self._intervals: list[tuple[str, Any, Any]] = []  # device phases, read at the window's end
        self._data = 0.0
        self._wall = 0.0
        self._steps = 0
        self._step = 0
        self._pause_s = 0.0
        self._pause_names: list[str] = []
        self._pause_depth = 0

    # -- per step -------------------------------------------------------------------------
    def begin(self) -> None:
        """Start the clock before the first step (later calls keep the running step's start)."""
        if self._step_start is None:
            self._step_start = self._now()

    def lap_data(self) -> None:
        """The next batch is here: the time since the step began was the wait for data."""
        now = self._now()
        if self._step_start is None:
            self._step_start = now
        self._data += now - self._step_start
        self._prev = self._clock.mark()

    def lap(self, phase: str) -> None:
        """The time since the previous lap belongs to ``phase``."""
        mark = self._clock.mark()
        self._intervals.append((phase, self._prev, mark))
        self._prev = mark

    def exchange_launched(self) -> None:
        """A gradient all-reduce was just launched (called per bucket from DDP's hook)."""
        self._launch = (self._clock.mark() if self._launch is None
                        else self._clock.remark(self._launch))

    def lap_split(self, first: str, second: str) -> None:
        """Like :meth:`lap`, split at the step's last exchange launch: before it ``first``
        (compute), after it ``second`` (the wait for the all-reduces); without a launch (one
        rank) all of it is ``first``."""
        mark = self._clock.mark()
        if self._launch is None:
            self._intervals.append((first, self._prev, mark))
        else:
            self._intervals.append((first, self._prev, self._launch))
            self._intervals.append((second, self._launch, mark))
            self._launch = None
        self._prev = mark

    def end_step(self, global_step: int) -> None:
        """The step is done; at a window boundary (``global_step`` a multiple of ``every``) the
        window is emitted."""
        now = self._now()
        start = now if self._step_start is None else self._step_start
        self._wall += now - start
        self._step_start = now
        self._steps += 1
        self._step = global_step
        if global_step % self.every == 0:
            self.flush()

    # -- pauses and windows ---------------------------------------------------------------
    @contextlib.contextmanager
    def pause(self, what: str | None = None) -> Iterator[None]:
        """Time spent inside is a pause, not step time; ``what`` names it in the next event's
        ``pause`` list. Nested pauses count once (the outermost is timed)."""
        if what is not None and what not in self._pause_names:
            self._pause_names.append(what)
        self._pause_depth += 1
        t0 = self._now()
        try:
            yield
        finally:
            self._pause_depth -= 1
            if self._pause_depth == 0:
                spent = self._now() - t0
                self._pause_s += spent
                if self._step_start is not None:
                    self._step_start += spent

    def flush(self) -> None:
        """Emit the window's means (nothing when the window has no steps): at every window
        boundary, and at the end of an epoch or before a stop."""
        if self._steps == 0:
            return
        sums = dict.fromkeys(PHASES, 0.0)
        sums["data"] = self._data
        if self._intervals:
            self._clock.settle()
            for phase, start, end in self._intervals:
                sums[phase] += max(0.0, self._clock.elapsed(start, end))
        self._clock.recycle()
        n = self._steps
        means = {f"{phase}_s": sums[phase] / n for phase in PHASES}
        step_s = self._wall / n
        other_s = max(0.0, step_s - sum(means.values()))
        self._emit("timing", step=self._step, steps=n, host=self.host, device=self.device,
                   step_s=round(step_s, 6), **{k: round(v, 6) for k, v in means.items()},
                   other_s=round(other_s, 6), pause_s=round(self._pause_s, 6), pause=list(self._pause_names))
        self._intervals.clear()
        self._prev = self._launch = None
        self._data = self._wall = self._pause_s = 0.0
        self._steps = 0
        self._pause_names = []


class NullTimer:
    """``--timing-every 0``: the same calls, nothing measured or emitted."""

    every = 0

    def begin(self) -> None:
        pass

    def lap_data(self) -> None:
        pass

    def lap(self, phase: str) -> None:
        pass

    def exchange_launched(self) -> None:
        pass

    def lap_split(self, first: str, second: str) -> None:
        pass

    def end_step(self, global_step: int) -> None:
        pass

    def pause(self, what: str | None = None) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def flush(self) -> None:
        pass


def make_step_timer(emit: Callable[..., None], *, every: int, host: str,
                    device: Any) -> StepTimer | NullTimer:
    """The rank's timer: a :class:`NullTimer` when ``every`` is 0, else a :class:`StepTimer`
    whose clock fits the device (CUDA events on a GPU, ``perf_counter`` on a CPU)."""
    if every <= 0:
        return NullTimer()
    device_type = getattr(device, "type", str(device).split(":", 1)[0])
    clock: Clock = CudaClock() if device_type == "cuda" else HostClock()
    return StepTimer(emit, every=every, host=host, device=str(device), clock=clock)
