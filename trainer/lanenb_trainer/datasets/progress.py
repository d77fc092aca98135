"""Progress for long fetch steps: tqdm bars (``tqdm.auto``: widgets in a notebook, text in a
terminal, with rate and ETA) or a callback ``fn(stage, name, done, total)`` for front ends that
draw their own (the ``DatasetPreview`` fetch button)."""

from __future__ import annotations

from typing import Any, Callable, Protocol, Union

__all__ = ["ProgressCallback", "Progress", "make_progress"]


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
            from tqdm.auto import tqdm

            bytes_ = unit == "B"
            self._bar = tqdm(total=total, initial=initial, desc=f"{stage} {name}", unit=unit,
                             unit_scale=bytes_, unit_divisor=1024 if bytes_ else 1000,
                             dynamic_ncols=True, leave=True)
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


ProgressArg = Union[bool, ProgressCallback, None]


def make_progress(progress: ProgressArg) -> Callable[..., Progress]:
    """A factory of :class:`Progress` for ``progress=True`` (tqdm), a callback, or ``False``."""
    bar = progress is True
    callback = progress if callable(progress) else None

    def factory(stage: str, name: str, total: int | None, initial: int = 0, unit: str = "B") -> Progress:
        return Progress(stage, name, total, initial, bar=bar, callback=callback, unit=unit)

    return factory
