"""Progress bars that suit where they are written: every progress bar of lanenb and its trainer
comes from :func:`progress_bar`.

- a terminal: a tqdm bar (redrawn in place with ``\\r``);
- a Jupyter kernel: ``tqdm.auto`` (a widget);
- anything else (a file, a pipe, a CI log, a pod log): :class:`LineBar`, one plain line every
  ``interval`` seconds and a last line at the end. A tqdm bar there would write every redraw
  after a ``\\r``: a log that reads later as one endless line, or thousands of lines.

Imports only the standard library (tqdm when a bar is drawn).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TextIO, TypeVar

__all__ = ["progress_bar", "LineBar", "LINE_INTERVAL", "format_bytes", "format_eta", "is_terminal"]

T = TypeVar("T")

LINE_INTERVAL = 10.0  # seconds between two plain lines: a 10-minute step leaves 60 lines, not 10,000


def format_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB`` (binary units, as tqdm's ``unit_divisor=1024``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def format_eta(seconds: float) -> str:
    """``178`` -> ``0:02:58``."""
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}"


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal (a closed or odd stream is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _in_notebook(stream: Any) -> bool:
    """A Jupyter kernel's output stream (``ipykernel.iostream.OutStream``): tqdm.auto draws a widget."""
    return type(stream).__module__.startswith("ipykernel")


class LineBar(Generic[T]):
    """A tqdm-like bar that writes plain lines, for output that is not a terminal::

        synth frames: 120/1000 frame (12%), 45.1 frame/s, ETA 0:00:19

    It has the part of tqdm's interface lanenb uses: iteration, ``update``, ``n`` and ``total``
    (settable), ``refresh``, ``set_postfix_str``, ``set_description``, ``write``, ``close`` and
    ``with``. A line is written when ``interval`` seconds have passed since the last one (checked
    on each update), and a last one at ``close`` (its counts, the elapsed time and the mean rate).

    Args:
        iterable: what to iterate over (``for x in LineBar(range(10))``), or ``None``.
        total: the expected count (``len(iterable)`` when it has one), or ``None`` if unknown.
        desc: the line's label.
        unit: the unit counted; ``"B"`` with ``unit_scale`` prints KiB/MiB/GiB.
        unit_scale: scale byte counts (only for ``unit="B"``).
        initial: the count already done (a resumed download).
        file: where to write (default: ``sys.stderr`` at the time of each line, as tqdm).
        disable: write nothing (iteration still passes through).
        interval: seconds between two lines.
        clock: ``time.monotonic`` (tests pass a fake clock).
    """

    def __init__(self, iterable: Iterable[T] | None = None, *, total: float | None = None, desc: str = "",
                 unit: str = "it", unit_scale: bool = False, initial: float = 0, file: TextIO | None = None,
                 disable: bool = False, interval: float = LINE_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not interval >= 0:
            raise ValueError(f"interval={interval!r}: must be >= 0 seconds")
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.bytes = unit == "B" and unit_scale
        self.n: float = initial
        self.file, self.disable, self.interval, self.clock = file, disable, interval, clock
        self.postfix = ""
        self._t0 = self._last = clock()
        self._n0 = initial
        self._closed = False

    # ------------------------------------------------------------------ tqdm's interface
    def __iter__(self) -> Iterator[T]:
        if self.iterable is None:
            raise TypeError("this LineBar wraps no iterable")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> LineBar[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: float = 1) -> None:
        self.n += n
        self.refresh()

    def refresh(self) -> None:
        """Write a line if ``interval`` seconds have passed since the last one."""
        now = self.clock()
        if not self.disable and not self._closed and now - self._last >= self.interval:
            self._last = now
            self._print(self._text(now, final=False))

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = str(s)

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    def write(self, s: str, file: TextIO | None = None) -> None:
        print(s, file=file or self.file or sys.stdout, flush=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self.disable:
            self._print(self._text(self.clock(), final=True))

    # ------------------------------------------------------------------ text
    def _count(self, n: float) -> str:
        if self.bytes:
            return format_bytes(n)
        return f"{n:g}"

    def _text(self, now: float, *, final: bool) -> str:
        text = f"{self.desc}: " if self.desc else ""
        text += self._count(self.n)
        if self.total:
            text += f"/{self._count(self.total)}"
        if not self.bytes:
            text += f" {self.unit}"
        if self.total:
            text += f" ({min(self.n / self.total, 1.0):.0%})"
        elapsed = now - self._t0
        gained = self.n - self._n0
        if final:
            text += f" in {format_eta(elapsed)}"
        if elapsed > 0 and gained > 0:
            rate = gained / elapsed
            text += f", {format_bytes(rate)}/s" if self.bytes else f", {rate:.3g} {self.unit}/s"
            if not final and self.total and self.n < self.total:
                text += f", ETA {format_eta((self.total - self.n) / rate)}"
        if self.postfix:
            text += f" [{self.postfix}]"
        return text

    def _print(self, text: str) -> None:
        print(text, file=self.file or sys.stderr, flush=True)


def progress_bar(iterable: Iterable[T] | None = None, *, total: float | None = None, desc: str = "",
                 unit: str = "it", unit_scale: bool = False, initial: float = 0, file: TextIO | None = None,
                 disable: bool = False, leave: bool = True, interval: float | None = None) -> Any:
    """A progress bar for ``file`` (default ``sys.stderr``, as tqdm): a tqdm bar on a terminal, a
    widget in a Jupyter kernel, :class:`LineBar` plain lines anywhere else.

    ``LANENB_PROGRESS=lines`` forces plain lines and ``LANENB_PROGRESS=bars`` tqdm (e.g. a CI
    runner that renders ``\\r`` itself); ``LANENB_PROGRESS_INTERVAL`` sets the seconds between
    plain lines (default :data:`LINE_INTERVAL`).

    Returns:
        Something with tqdm's ``update``/``close``/iteration interface (see :class:`LineBar`).
    """
    stream = file if file is not None else sys.stderr
    mode = os.environ.get("LANENB_PROGRESS", "").strip().lower()
    if mode not in ("", "auto", "lines", "bars"):
        raise ValueError(f"LANENB_PROGRESS={mode!r}: must be auto, lines or bars")
    bars = mode == "bars" or (mode != "lines" and (is_terminal(stream) or _in_notebook(stream)))
    if bars and not disable:
        from tqdm.auto import tqdm

        divisor = 1024 if unit == "B" and unit_scale else 1000
        return tqdm(iterable, total=total, desc=desc, unit=unit, unit_scale=unit_scale, unit_divisor=divisor,
                    initial=initial, file=file, leave=leave, dynamic_ncols=True)
    if interval is None:
        raw = os.environ.get("LANENB_PROGRESS_INTERVAL", "")
        try:
            interval = float(raw) if raw else LINE_INTERVAL
        except ValueError:
            raise ValueError(f"LANENB_PROGRESS_INTERVAL={raw!r}: must be a number of seconds") from None
    return LineBar(iterable, total=total, desc=desc, unit=unit, unit_scale=unit_scale, initial=initial,
                   file=file, disable=disable, interval=interval)
