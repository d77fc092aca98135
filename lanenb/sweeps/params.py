"""A trial's parameters applied to the sweep's base job: which flags a sweep may vary, and how.

A searched name is either a ``TrainSpec`` field that shapes the job (``processes``,
``batch_size``, ``epochs``...) or a trainer flag that every rank receives (``lr``,
``warmup_steps``, ``momentum``...: appended to ``extra_args``, where the last value wins).
Names that identify or place the job (its name, dataset, run dir, backend) are not searchable.
Each trial's job is labelled with its sweep and trial number (``trial_labels``, the job's
``labels``): on Kubernetes ``kubectl get mpijobs -l lanenb.io/sweep=NAME`` lists them, on
AzureML they are the job's tags.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from lanenb.contract.spec import TrainSpec
from lanenb.sweeps.space import SearchSpace, SearchSpaceError
from lanenb_trainer.config import TrainConfig
from lanenb_trainer.flags import to_flags

__all__ = ["RETRAIN_LABEL", "SPEC_SEARCHABLE", "SWEEP_LABEL", "TRAINER_SEARCHABLE", "TRIAL_LABEL", "apply_params",
           "check_searchable", "trial_labels"]

SWEEP_LABEL = "lanenb.io/sweep"
TRIAL_LABEL = "lanenb.io/trial"
RETRAIN_LABEL = "lanenb.io/retrain-of"  # the winner trained again (Sweep.retrain): the trial it came from

SPEC_SEARCHABLE = ("processes", "gpus", "batch_size", "epochs", "engine", "backbone", "num_workers",
                   "val_batch_size", "max_steps", "large_shm")
_NOT_TRAINER = {"data", "run_dir", "resume", "run_id", "weights", "enable_snapshot", "pvc_name", "device"}
TRAINER_SEARCHABLE = tuple(f.name for f in dataclasses.fields(TrainConfig)
                           if f.name not in _NOT_TRAINER and f.name not in SPEC_SEARCHABLE)


def check_searchable(space: SearchSpace) -> None:
    """Refuse a dimension that no job flag of that name can take.

    Raises:
        SearchSpaceError: naming the flag, and what can be searched.
    """
    for dim in space.dimensions:
        if dim.name not in SPEC_SEARCHABLE and dim.name not in TRAINER_SEARCHABLE:
            flag = "--" + dim.name.replace("_", "-")
            known = ", ".join("--" + n.replace("_", "-") for n in (*SPEC_SEARCHABLE, *TRAINER_SEARCHABLE))
            raise SearchSpaceError(f"{flag} cannot be searched: it is not a job or trainer flag that varies a run "
                                   f"(searchable: {known})")


def trial_labels(sweep: str, trial: int) -> dict[str, str]:
    """The labels of trial ``trial``'s job (valid label values: a sweep name is 1-40 of
    ``[a-z0-9-]`` with alphanumeric ends, ``check_sweep_name``)."""
    return {SWEEP_LABEL: sweep, TRIAL_LABEL: str(trial)}


def apply_params(base: TrainSpec, params: Mapping[str, Any], *, name: str,
                 labels: Mapping[str, str] | None = None) -> TrainSpec:
    """``base`` with a trial's ``params`` applied, named ``name``, with ``labels`` added to the
    base job's own (``TrainSpec.labels``).

    Raises:
        SpecError: a value the job refuses (the spec's own check, naming the field).
        SearchSpaceError: a name that is not searchable.
    """
    direct = {k: v for k, v in params.items() if k in SPEC_SEARCHABLE}
    trainer = {k: v for k, v in params.items() if k in TRAINER_SEARCHABLE}
    unknown = sorted(set(params) - set(direct) - set(trainer))
    if unknown:
        raise SearchSpaceError(f"--{unknown[0].replace('_', '-')} cannot be searched")
    data = base.to_dict()
    data.update(direct)
    data["name"] = name
    data["run_dir"] = None  # each trial its own run dir under $LANENB_HOME/runs
    data["extra_args"] = list(base.extra_args) + to_flags(trainer)
    if labels:  # wherever the backend keeps labels (MPIJob and pods, AzureML tags, the registry)
        data["labels"] = {**base.labels, **labels}
    return TrainSpec.from_dict(data)
