"""Epochs as people count them: the one place that turns an epoch index into words.

The events, checkpoints and ``metrics.json`` count epochs from 0 (``epoch`` is an index: the
sampler's seed and the resume point use it), while people count from 1 (Keras' "Epoch 1/10"),
as the charts' axes (1..N) and the status line ("epoch 8/8") do. Every text a person reads (the
headline's "best.pt, epoch 7", the log's "epoch 10/10 done", resume lines, tables, tracker tags)
goes through these two functions instead of an ad-hoc ``+ 1``, so no view is off by one from
another. The JupyterLab sidebar has its twin, ``epochText`` in ``extension/src/dom.ts``.

It lives with the trainer because the headline labels are written by the trainer first
(``metrics.json``); ``lanenb`` imports it from here. No imports.
"""

from __future__ import annotations

from typing import Any

__all__ = ["epoch_number", "epoch_text"]


def _index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def epoch_number(epoch: int) -> int:
    """The number people say for the 0-based ``epoch`` of the events: the first epoch is 1.

    Args:
        epoch: an epoch index as the events, checkpoints and ``metrics.json`` carry it (from 0).

    Returns:
        ``epoch + 1``; also the count of epochs done once that epoch has ended.
    """
    return epoch + 1


def epoch_text(epoch: Any, epochs: Any = None) -> str:
    """Words for the 0-based ``epoch``: ``"epoch 7"``, or ``"epoch 7/10"`` with the run's
    ``epochs`` (an index past the last, the loop's counter once it is done, reads as the last:
    "epoch 10/10"); ``"epoch ?"`` when the index is missing or not a non-negative integer (an
    event from an older or foreign writer is still shown, not a crash).

    Args:
        epoch: the epoch index (from 0), as an event carries it.
        epochs: the run's number of epochs, or ``None`` to leave the total out.

    Returns:
        The text every face prints for that epoch.
    """
    index, total = _index(epoch), _index(epochs)
    if index is not None and total:
        index = min(index, total - 1)
    shown = "?" if index is None else str(epoch_number(index))
    return f"epoch {shown}" + (f"/{total}" if total else "")
