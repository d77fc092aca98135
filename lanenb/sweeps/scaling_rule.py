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
from lanenb_trainer.training.resize import rule_factor

__all__ = ["RULES", "explain", "scaled_lr"]

RULES = ("linear", "sqrt")
# what each rule is called where the view names it
_NAMED = {"linear": "the linear rule with warm-up (Goyal et al., 2017)",
          "sqrt": "the square-root rule with warm-up (Hoffer et al., 2017)"}


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
    factor = rule_factor(ratio, rule)  # the trainer's resize on resume moves the rate by the same rule
    # effective rate = per-rank lr x processes (the trainer's world-size scaling)
    return lr * processes * factor / new_processes


def explain(lr: float, new_lr: float, *, batch_size: int, processes: int, new_batch_size: int, new_processes: int,
            rule: str, warmup_steps: int) -> str:
    """One line that says what ``scaled_lr`` did and why, for a person about to train the winner
    at another size: the two global batches, the per-rank ``--lr`` and the effective rate
    (``lr x processes``, what the optimizer uses), the rule by name and the warm-up kept.

    Raises:
        UserError: an unknown rule.
    """
    if rule not in RULES:
        raise UserError(f"rule {rule!r} is not one of {', '.join(RULES)}")
    old_global, new_global = batch_size * processes, new_batch_size * new_processes
    if old_global == new_global and processes == new_processes:
        return (f"at the size it was chosen at ({processes} rank(s) x batch {batch_size} = {old_global} images per "
                f"step): --lr {lr:.4g} per rank as chosen, {warmup_steps} warm-up steps")
    ratio = new_global / old_global
    factor = f"x{ratio:.4g} as the batch" if rule == "linear" else f"x{math.sqrt(ratio):.4g} = sqrt({ratio:.4g})"
    warmup = (f"its {warmup_steps} warm-up steps kept" if warmup_steps or ratio <= 1 else
              "it had no warm-up: give one at a larger batch (--warmup-steps), as the rule's authors do")
    return (f"at {new_processes} rank(s) x batch {new_batch_size} = {new_global} images per step (chosen at "
            f"{processes} x {batch_size} = {old_global}): --lr {new_lr:.4g} per rank (was {lr:.4g}); the effective "
            f"rate (--lr x ranks) {lr * processes:.4g} -> {new_lr * new_processes:.4g}, {factor}, by {_NAMED[rule]}; "
            f"{warmup}")
