"""Sweeps: many runs as one experiment (search a space of flags, stop the losers early, keep
the winner), with Optuna as the engine and ordinary lanenb jobs as the trials.

    from lanenb.sweeps import sweep, attach
    s = sweep(TrainSpec(dataset="data", processes=1, epochs=6), {"lr": "1e-3..1e-1:log"}, trials=8)
    s.trials(); s.best; s.stop()

Rooms: ``space`` (the flags' search syntax), ``params`` (a trial's values applied to the base
job), ``study`` (storage, samplers, pruners, the objective), ``driver`` (the detached loop),
``sweep`` (the API and the handle).
"""

from lanenb.sweeps.space import SearchSpace, SearchSpaceError
from lanenb.sweeps.study import Objective, SweepNotFoundError
from lanenb.sweeps.sweep import Sweep, TrialRow, attach, list_sweeps, sweep

__all__ = ["Objective", "SearchSpace", "SearchSpaceError", "Sweep", "SweepNotFoundError", "TrialRow", "attach",
           "list_sweeps", "sweep"]
