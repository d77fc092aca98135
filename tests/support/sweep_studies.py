"""Sweeps recorded straight into their Optuna study, as the driver leaves them, without training:
for the faces that only read a sweep (the server's routes, the sidebar).

Each trial goes the driver's way (``lanenb.sweeps.driver``): its parameters are enqueued (as
``first=`` sets are) and asked for, its job name set, each validation result reported per epoch,
then it is told complete (its best epoch's value), pruned (with the driver's own "pruned at
epoch N: ..." words) or failed; a ``running`` trial is asked for and left so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lanenb.contract.spec import TrainSpec

__all__ = ["Trial", "record_sweep"]


@dataclass
class Trial:
    """One trial to record: ``outcome`` is ``complete``, ``pruned``, ``failed`` or ``running``."""

    params: dict[str, Any]
    values: Sequence[float] = ()  # the objective after epoch 1, 2...
    outcome: str = "complete"
    error: str = "the job failed"


def record_sweep(name: str, trials: Sequence[Trial], *, space: Mapping[str, Any] | None = None,
                 total: int | None = None, objective: str = "val.accuracy", pruner: str = "median",
                 env: Mapping[str, str] | None = None) -> None:
    """The study of sweep ``name`` with ``trials`` recorded; ``total`` trials asked for in all
    (default: as many as recorded, so the sweep reads ``finished``)."""
    import optuna

    from lanenb.sweeps.driver import SweepSettings, _pruned_why, _Running
    from lanenb.sweeps.space import SearchSpace
    from lanenb.sweeps.study import Objective, create_study, make_pruner, make_sampler

    parsed = SearchSpace.parse(space or {"lr": "1e-3..1e-1:log", "momentum": "0.8,0.9"})
    goal = Objective.parse(objective)
    base = TrainSpec(dataset="/data/tusimple", processes=1, epochs=3, env=dict(env or {}))
    settings = SweepSettings(base=base.to_dict(), space=parsed.to_dict(), objective=goal.__dict__,
                             trials=total or len(trials), parallel=1, sampler="tpe", pruner=pruner, min_epochs=1)
    study = create_study(name, goal.direction, make_sampler("tpe", parsed, 0), make_pruner(pruner, 1))
    study.set_user_attr("lanenb", settings.to_dict())
    pick = max if goal.direction == "maximize" else min
    for spec in trials:
        study.enqueue_trial(dict(spec.params))
        trial = study.ask(parsed.distributions())
        trial.set_user_attr("job", f"{name}-{trial.number}")
        values = {epoch: value for epoch, value in enumerate(spec.values, start=1)}
        for epoch, value in values.items():
            trial.report(value, epoch)
        if spec.outcome == "complete":
            study.tell(trial.number, pick(values.values()))
        elif spec.outcome == "pruned":
            trial.set_user_attr("pruned", _pruned_why(study, _Running(trial, None, values=values), max(values), goal))
            study.tell(trial.number, state=optuna.trial.TrialState.PRUNED)
        elif spec.outcome == "failed":
            trial.set_user_attr("error", spec.error)
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        elif spec.outcome != "running":
            raise ValueError(f"outcome {spec.outcome!r} is not complete, pruned, failed or running")
