"""Where a sweep lives and how it searches: an Optuna study in ``$LANENB_HOME/sweeps/sweeps.db``.

Optuna is the engine (sampling, pruning, storage); lanenb adds what a sweep of lanenb jobs
needs around it. The study is the sweep's only record: its user attributes hold the base job,
the space, the objective and the settings, each trial's user attributes its job and why it
was pruned, so ``optuna-dashboard sqlite:///$LANENB_HOME/sweeps/sweeps.db`` shows the same
sweep, and a driver started again after ``kill -9`` continues from it.

Samplers and pruners are named in small tables (the papermill engine-registry shape): a new
one is one entry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanenb.errors import UserError
from lanenb.home import lanenb_home, make_private_dir
from lanenb.sweeps.space import SearchSpace

__all__ = ["Objective", "PRUNERS", "SAMPLERS", "SweepNotFoundError", "check_sweep_name", "load_study",
           "make_pruner", "make_sampler", "storage_url", "sweeps_dir"]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")


class SweepNotFoundError(UserError, KeyError):
    """No sweep of that name in ``$LANENB_HOME/sweeps``."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "sweep not found"


def check_sweep_name(name: Any) -> str:
    """A sweep name: lower-case letters, digits and '-', at most 40 (its trials are jobs named
    ``<sweep>-<n>``, which must stay RFC 1123 labels of 63 characters).

    Raises:
        UserError: the name, and what a name may hold.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"sweep name {name!r} is not valid: 1-40 lower-case letters, digits or '-', "
                        "starting and ending with a letter or digit")
    return name


def sweeps_dir() -> Path:
    """``$LANENB_HOME/sweeps`` (owner only): the study database and each driver's log."""
    return make_private_dir(lanenb_home() / "sweeps")


def storage_url() -> str:
    """The Optuna storage every sweep of this home shares (SQLite through SQLAlchemy)."""
    return f"sqlite:///{sweeps_dir() / 'sweeps.db'}"


def _storage() -> Any:
    import optuna

    # SQLite serialises writers: a generous lock timeout lets the driver and a notebook reading
    # the trials table share the file without "database is locked"
    return optuna.storages.RDBStorage(storage_url(), engine_kwargs={"connect_args": {"timeout": 30}})


def load_study(name: str, sampler: Any = None, pruner: Any = None) -> Any:
    """The sweep's Optuna study, searching with ``sampler`` and pruning with ``pruner`` (Optuna
    does not store them: the driver passes the sweep's own; readers need neither).

    Raises:
        SweepNotFoundError: no sweep of that name (the message lists the ones there are).
    """
    import optuna

    check_sweep_name(name)
    storage = _storage()
    try:
        return optuna.load_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner)
    except KeyError:
        known = sorted(s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False))
        raise SweepNotFoundError(f"no sweep named {name!r}" + (f"; there are: {', '.join(known)}" if known
                                                               else " (none yet)")) from None


def create_study(name: str, direction: str, sampler: Any, pruner: Any) -> Any:
    """A new study; an existing name is refused (a sweep is never overwritten).

    Raises:
        UserError: a sweep of that name exists (attach to it, or choose another name).
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the sweep says what it made, once
    try:
        return optuna.create_study(study_name=name, storage=_storage(),
                                   direction=optuna.study.StudyDirection[direction.upper()], sampler=sampler,
                                   pruner=pruner, load_if_exists=False)
    except optuna.exceptions.DuplicatedStudyError:
        raise UserError(f"a sweep named {name!r} exists: lanenb.sweeps.attach({name!r}) follows it, or choose "
                        "another name") from None


def _tpe(space: SearchSpace, seed: int | None) -> Any:
    import optuna

    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(2, min(10, len(space.names) * 2)))


def _random(space: SearchSpace, seed: int | None) -> Any:
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


def _grid(space: SearchSpace, seed: int | None) -> Any:
    import optuna

    return optuna.samplers.GridSampler(space.grid(), seed=seed)


SAMPLERS: dict[str, Callable[[SearchSpace, int | None], Any]] = {"tpe": _tpe, "random": _random, "grid": _grid}


def _asha(min_epochs: int) -> Any:
    import optuna

    # rungs at min_epochs, x4, x16...; the top quarter of each rung goes on (reduction factor 4,
    # Optuna's default). A third (3) kept 7 of 15 trials to the end in bench/sweep.py: only 36 %
    # fewer epochs; a quarter, replayed on the same trials' curves, 48 % for the same best trial.
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=max(1, min_epochs), reduction_factor=4)


def _median(min_epochs: int) -> Any:
    import optuna

    return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=max(0, min_epochs - 1))


def _none(min_epochs: int) -> Any:
    import optuna

    return optuna.pruners.NopPruner()


PRUNERS: dict[str, Callable[[int], Any]] = {"asha": _asha, "median": _median, "none": _none}


def _pick(table: dict[str, Any], what: str, name: Any) -> Any:
    if name not in table:
        raise UserError(f"{what} {name!r} is not one of {', '.join(table)}")
    return table[name]


def make_sampler(name: str, space: SearchSpace, seed: int | None = None) -> Any:
    """The Optuna sampler called ``name`` (``tpe``, ``random``, ``grid``) for ``space``.

    Raises:
        UserError: an unknown sampler, or a grid over a range.
    """
    return _pick(SAMPLERS, "sampler", name)(space, seed)


def make_pruner(name: str, min_epochs: int = 1) -> Any:
    """The Optuna pruner called ``name`` (``asha``, ``median``, ``none``); no trial is pruned
    before ``min_epochs`` validation results.

    Raises:
        UserError: an unknown pruner.
    """
    return _pick(PRUNERS, "pruner", name)(min_epochs)


@dataclass(frozen=True)
class Objective:
    """What a sweep optimises: a field of the trials' ``eval`` events of one split, e.g.
    ``val.accuracy`` (the default), ``val.fn``; ``direction`` ``maximize`` or ``minimize``
    (default: maximize accuracy, minimize the rest). A trial's value is its best epoch's, the
    model its run keeps as ``best.pt``."""

    split: str = "val"
    field: str = "accuracy"
    direction: str = "maximize"

    @classmethod
    def parse(cls, text: str = "val.accuracy", direction: str | None = None) -> Objective:
        """``"val.accuracy"`` (or ``"accuracy"``: the validation split) and a direction.

        Raises:
            UserError: another shape, a split that is not ``val`` (the test split is scored once,
                at the end, and choosing on it would leak the test set into the search), or a
                direction other than maximize/minimize.
        """
        split, _, field = str(text).rpartition(".")
        split = split or "val"
        if split != "val" or not re.match(r"^[a-z_]+$", field):
            raise UserError(f"objective {text!r}: give a validation metric such as val.accuracy, val.fp or "
                            "val.fn (the test split is for the final figure, not for choosing)")
        if direction is None:
            direction = "maximize" if field == "accuracy" else "minimize"
        if direction not in ("maximize", "minimize"):
            raise UserError(f"direction {direction!r} is not maximize or minimize")
        return cls(split, field, direction)

    @property
    def label(self) -> str:
        return f"{self.split}.{self.field}"

    def value_of(self, event: Any) -> float | None:
        """The objective's value in an event, or None when the event is not one of its results."""
        if event is None or event.kind != "eval" or event.get("split") != self.split:
            return None
        value = event.get(self.field)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def better(self, a: float, b: float) -> bool:
        return a > b if self.direction == "maximize" else a < b
