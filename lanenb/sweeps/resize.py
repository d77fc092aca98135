"""The sweep's winner at another size: its parameters with the learning rate moved by a scaling
rule, and the one line that says so.

A sweep chooses its learning rate at one global batch (``batch_size x processes``); trained on
more GPUs, or with a batch that fills them, the same ``--lr`` is no longer the chosen run. This
is what ``Sweep.scaled_params`` returns, what ``Sweep.retrain`` trains and what the sweep's view
shows when it is asked for another size (``%lanesweep --attach NAME -np 4``,
``lanenb sweep show NAME -np 4``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lanenb.contract.spec import TrainSpec
from lanenb.errors import UserError
from lanenb.sweeps.scaling_rule import explain, scaled_lr

__all__ = ["ScaledParams", "scaled_params", "trainer_value"]


@dataclass(frozen=True)
class ScaledParams:
    """The winner's parameters at a size (``params``: ``processes`` and ``batch_size`` set, ``lr``
    scaled), the rule used and ``line``, its explanation in words."""

    params: dict[str, Any]
    lr: float
    rule: str
    line: str

    def __str__(self) -> str:
        return self.line


def trainer_value(spec: TrainSpec, flag: str, default: Any) -> str | Any:
    """The value the base job gives its ranks for ``flag`` (its last one in ``extra_args``, which
    wins), else ``default`` (the trainer's)."""
    args = list(spec.extra_args)
    found = [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]
    return found[-1] if found else default


def scaled_params(base: TrainSpec, params: Mapping[str, Any], *, processes: int | None = None,
                  batch_size: int | None = None, rule: str = "linear") -> ScaledParams:
    """``params`` (a trial's, over the sweep's ``base`` job) at ``processes`` x ``batch_size``.

    Args:
        base: the sweep's base job (the sizes and ``--lr`` a trial did not search).
        params: the trial's parameters.
        processes, batch_size: the new size; None keeps the trial's.
        rule: ``linear`` or ``sqrt`` (``lanenb.sweeps.scaling_rule``).

    Returns:
        A :class:`ScaledParams`; ``lr`` is in its params when the trial searched it or the size changed.

    Raises:
        UserError: an unknown rule, or a size that is not a whole number >= 1.
    """
    from lanenb_trainer.config import TrainConfig

    defaults = TrainConfig()
    out = dict(params)
    old_bs, old_np = int(out.get("batch_size", base.batch_size)), int(out.get("processes", base.processes))
    for label, value in (("processes", processes), ("batch_size", batch_size)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise UserError(f"{label}={value!r}: must be a whole number >= 1")
    new_bs, new_np = batch_size or old_bs, processes or old_np
    lr = float(out.get("lr", trainer_value(base, "--lr", defaults.lr)))
    new_lr = scaled_lr(lr, batch_size=old_bs, processes=old_np, new_batch_size=new_bs, new_processes=new_np,
                       rule=rule)
    if "lr" in out or (new_bs, new_np) != (old_bs, old_np):
        out["lr"] = new_lr
    out.update(batch_size=new_bs, processes=new_np)
    warmup = int(out.get("warmup_steps", trainer_value(base, "--warmup-steps", defaults.warmup_steps)))
    line = explain(lr, new_lr, batch_size=old_bs, processes=old_np, new_batch_size=new_bs, new_processes=new_np,
                   rule=rule, warmup_steps=warmup)
    return ScaledParams(out, new_lr, rule, line)
