"""Progress for long fetch steps: progress bars (``lanenb_trainer.progress.progress_bar``: widgets
in a notebook, a tqdm bar in a terminal, plain lines in a log) or a callback
``fn(stage, name, done, total)`` for front ends that draw their own (the ``DatasetPreview`` fetch
button), or :class:`LineProgress`: plain text lines every few seconds with a byte rate, for logs
that are read later (the cluster fetch Job's pod log)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from lanenb_trainer.progress import format_bytes
from lanenb_trainer.progress import format_eta as _format_eta

__all__ = ["LineProgress", "Progress", "ProgressCallback", "format_bytes", "make_progress"]


class ProgressCallback(Protocol):
    def __call__(self, stage: str, name: str, done: int, total: int | None) -> None: ...


class Progress:
    """One bar: ``update(n)`` then ``close()``. Silent when neither tqdm nor a callback is on."""

    def __init__(self, stage: str, name: str, total: int | None, initial: int = 0, *,
                 bar: bool = False, callback: ProgressCallback | None = None, unit: str = "B") -> None:
        self.stage, self.name, self.total, self.done = stage, name, total, initial
        self.callback = callback
        self._bar: Any = None
        if bar:
            from lanenb_trainer.progress import progress_bar

            self._bar = progress_bar(total=total, initial=initial, desc=f"{stage} {name}", unit=unit,
                                     unit_scale=unit == "B")
        self._emit()

    def _emit(self) -> None:
        if self.callback is not None:
            self.callback(self.stage, self.name, self.done, self.total)

    def update(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        if self.callback is not None:
            self._emit()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


ProgressArg = bool | ProgressCallback | None


def make_progress(progress: ProgressArg) -> Callable[..., Progress]:
    """A factory of :class:`Progress` for ``progress=True`` (tqdm), a callback, or ``False``."""
    bar = progress is True
    callback = progress if callable(progress) else None

    def factory(stage: str, name: str, total: int | None, initial: int = 0, unit: str = "B") -> Progress:
        return Progress(stage, name, total, initial, bar=bar, callback=callback, unit=unit)

    return factory


class LineProgress:
    """A progress callback writing one plain line per step every ``interval`` seconds::

        download train_set.zip: 1.2 GiB / 9.6 GiB (12%), 48.3 MiB/s, ETA 0:02:58

    The first and the last line of each step (``done == total``) are always written, so even a
    step that lasts a fraction of a second leaves its size in the log. The rate counts only the
    bytes of this run (a resumed download starts at its offset).

    Args:
        interval: seconds between two lines of the same step.
        out: where to write (default: ``sys.stdout`` at the time of the call), flushed per line.
        clock: ``time.monotonic`` (tests pass a fake clock).
    """

    def __init__(self, interval: float = 5.0, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not interval >= 0:
            raise ValueError(f"interval={interval!r}: must be >= 0 seconds")
        self.interval, self.out, self.clock = interval, out, clock
        self._steps: dict[tuple[str, str], list[float]] = {}  # (stage, name) -> [t0, done0, last print]

    def __call__(self, stage: str, name: str, done: int, total: int | None) -> None:
        now = self.clock()
        step = self._steps.get((stage, name))
        finished = total is not None and done >= total
        if step is None or step[1] > done:  # a new step, or a retry that started over
            self._steps[(stage, name)] = step = [now, float(done), now]
        elif step[2] < 0 or (not finished and now - step[2] < self.interval):
            return  # its last line is written already, or the previous one is too recent
        step[2] = -1.0 if finished else now
        self._write(stage, name, done, total, now - step[0], done - step[1])

    def _write(self, stage: str, name: str, done: int, total: int | None, elapsed: float, gained: float) -> None:
        text = f"{stage} {name}: {format_bytes(done)}"
        if total:
            text += f" / {format_bytes(total)} ({min(done / total, 1.0):.0%})"
        if elapsed > 0 and gained > 0:
            rate = gained / elapsed
            text += f", {format_bytes(rate)}/s"
            if total and done < total:
                text += f", ETA {_format_eta((total - done) / rate)}"
        out = self.out or sys.stdout
        print(text, file=out, flush=True)
