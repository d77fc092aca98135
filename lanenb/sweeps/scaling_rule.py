"""The learning rate for another batch size or rank count: the rule a sweep's winner is moved by.

The trainer's ``--lr`` is per rank and already scaled linearly by the world size
(``lanenb_trainer.recipe.lr_at``: the effective rate is ``lr x processes``), so what a rule has
to say is how the effective rate follows the global batch (``batch_size x processes``):

- ``linear`` (Goyal et al., 2017, "Accurate, Large Minibatch SGD"): the rate grows with the
  global batch, with a warm-up; right for SGD with momentum, which SCNN trains with, up to a few
  thousand images per step.
- ``sqrt`` (Krizhevsky, 2014; Hoffer et al., 2017): the rate grows with its square root; more
  cautious, often better for very large batches or adaptive optimisers.

Both keep the winner's warm-up steps (a larger batch reaches the same number of images in fewer
steps, so the warm-up covers more data, as the rule's authors advise).
"""

from __future__ import annotations

import math

from lanenb.errors import UserError

__all__ = ["RULES", "scaled_lr"]

RULES = ("linear", "sqrt")


def scaled_lr(lr: float, *, batch_size: int, processes: int, new_batch_size: int, new_processes: int,
              rule: str = "linear") -> float:
    """The per-rank ``--lr`` that keeps the chosen run's training when the job changes size.

    Args:
        lr: the per-rank rate that was chosen (a sweep's best ``lr``).
        batch_size, processes: the job it was chosen for.
        new_batch_size, new_processes: the job it is moved to.
        rule: ``linear`` or ``sqrt`` (see the module docstring).

    Raises:
        UserError: an unknown rule, or a size that is not a positive whole number.
    """
    if rule not in RULES:
        raise UserError(f"rule {rule!r} is not one of {', '.join(RULES)}")
    for label, value in (("batch_size", batch_size), ("processes", processes), ("new batch_size", new_batch_size),
                         ("new processes", new_processes)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UserError(f"{label}={value!r}: must be a whole number >= 1")
    ratio = (new_batch_size * new_processes) / (batch_size * processes)
    factor = ratio if rule == "linear" else math.sqrt(ratio)
    # effective rate = per-rank lr x processes (the trainer's world-size scaling)
    return lr * processes * factor / new_processes
