"""The sweep driver: asks Optuna for parameters, runs each trial as an ordinary lanenb job,
reports every validation result to its trial as it arrives, and cancels the trials Optuna
prunes.

It runs detached (``python -m lanenb.sweeps NAME``, started by ``lanenb.sweeps.sweep``),
like a local job's supervisor, so the sweep outlives the kernel that started it. Everything it
knows is in the study: started again after a crash or ``kill -9`` it adopts the trials whose
jobs still run, settles the ones that ended meanwhile and starts only the trials still missing,
so no finished trial runs twice. It stops when ``NAME.stop`` appears beside the database
(``Sweep.stop()``), cancelling its running trials through the Job API, not with signals.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanenb.contract.spec import TrainSpec
from lanenb.sweeps.params import apply_params, trial_labels
from lanenb.sweeps.space import SearchSpace
from lanenb.sweeps.study import Objective, load_study, make_pruner, make_sampler, sweeps_dir
from lanenb_trainer.epochs import epoch_number

__all__ = ["SweepSettings", "drive", "main", "stop_file", "pid_file"]

POLL_S = 0.5


@dataclass(frozen=True)
class SweepSettings:
    """A sweep's settings, kept in its study (user attribute ``lanenb``)."""

    base: dict[str, Any]
    space: list[dict[str, Any]]
    objective: dict[str, str]
    trials: int
    parallel: int
    sampler: str
    pruner: str
    min_epochs: int = 1
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def of(cls, study: Any) -> SweepSettings:
        return cls(**study.user_attrs["lanenb"])

    @property
    def objective_(self) -> Objective:
        return Objective(**self.objective)


def stop_file(name: str) -> Path:
    return sweeps_dir() / f"{name}.stop"


def pid_file(name: str) -> Path:
    return sweeps_dir() / f"{name}.driver.json"


@dataclass
class _Running:
    trial: Any
    job: Any
    cursor: str | None = None
    values: dict[int, float] = field(default_factory=dict)
    due: float = 0.0  # time.monotonic() of the next poll


def _poll_every(job: Any, poll_s: float) -> float:
    """Seconds between two polls of one trial: the driver's own pace, or its backend's where
    that is slower (AzureML's 2 s: each poll is two ARM / run-history reads and one per rank,
    which ARM throttles per subscription when many trials run at once)."""
    try:
        backend_pace = float(getattr(job.backend, "poll_interval", 0.0) or 0.0)
    except Exception:  # a backend that cannot be built now is polled at the driver's pace
        backend_pace = 0.0
    return max(poll_s, backend_pace)


def _log(text: str) -> None:
    print(f"[lanenb-sweep] {time.strftime('%H:%M:%S')} {text}", flush=True)


def _others_at(study: Any, number: int, epoch: int) -> list[float]:
    return [t.intermediate_values[epoch] for t in study.get_trials(deepcopy=False)
            if t.number != number and epoch in t.intermediate_values]


def _pruned_why(study: Any, run: _Running, epoch: int, objective: Objective) -> str:
    """Why the pruner stopped a trial, in its own rule's words.

    ASHA (successive halving): "pruned at epoch 3: val.accuracy 0.610, below the rung's cutoff
    0.800 (the top quarter of 7 trials there; best 0.800)"; the median pruner: "..., the other
    trials' median there 0.740 (best 0.800)".
    """
    import optuna

    value = run.values[epoch]
    others = _others_at(study, run.trial.number, epoch)
    text = f"pruned at epoch {epoch}: {objective.label} {value:.3f}"
    if not others:
        return text
    maximize = objective.direction == "maximize"
    best = max(others) if maximize else min(others)
    pruner = getattr(study, "pruner", None)
    if isinstance(pruner, optuna.pruners.SuccessiveHalvingPruner):
        # Optuna's rule: a trial goes on when it is at least as good as the value at position
        # len // reduction_factor - 1 of the rung's values, best first (its own included)
        factor = getattr(pruner, "_reduction_factor", 4)
        ranked = sorted([*others, value], reverse=maximize)
        cutoff = ranked[max(0, len(ranked) // factor - 1)]
        share = {2: "half", 3: "third", 4: "quarter"}.get(factor, f"1/{factor}")
        return (f"{text}, below the rung's cutoff {cutoff:.3f} (the top {share} of {len(ranked)} trials there; "
                f"best {best:.3f})")
    return f"{text}, the other trials' median there {statistics.median(others):.3f} (best {best:.3f})"


def _settle(study: Any, run: _Running, objective: Objective) -> None:
    """Tell Optuna how a finished trial's job ended: its best validation value, or failed."""
    import optuna

    status = run.job.status()
    run.trial.set_user_attr("state", status.state.value)
    if status.state.value == "succeeded" and run.values:
        pick = max if objective.direction == "maximize" else min
        study.tell(run.trial.number, pick(run.values.values()))
        _log(f"trial {run.trial.number} ({run.job.name}) done: {objective.label} {pick(run.values.values()):.4f}")
        return
    why = status.reason or status.message or (
        f"no {objective.label} result" if status.state.value == "succeeded" else status.state.value)
    run.trial.set_user_attr("error", str(why)[:500])
    study.tell(run.trial.number, state=optuna.trial.TrialState.FAIL)
    _log(f"trial {run.trial.number} ({run.job.name}) {status.state.value}: {why}")


def _follow(study: Any, run: _Running, objective: Objective) -> bool:
    """Feed a running trial its new validation results; True once the trial is settled."""
    import optuna

    batch = run.job.poll(run.cursor, max_lines=2000)
    run.cursor = batch.cursor
    for update in batch.updates:
        value = objective.value_of(update.event)
        if value is None:
            continue
        # epochs done: the pruners' resource, and the finished epoch's number as people say it
        epoch = epoch_number(int(update.event.get("epoch") or 0))
        if epoch in run.values:
            continue
        run.values[epoch] = value
        run.trial.report(value, epoch)
        if run.trial.should_prune():
            why = _pruned_why(study, run, epoch, objective)
            run.trial.set_user_attr("pruned", why)
            run.job.cancel(reason=why)  # the job's own record says why too (lanenb jobs list)
            study.tell(run.trial.number, state=optuna.trial.TrialState.PRUNED)
            _log(f"trial {run.trial.number} ({run.job.name}) {why}")
            return True
    if batch.final:
        _settle(study, run, objective)
        return True
    return False


def _adopt(study: Any, objective: Objective) -> dict[int, _Running]:
    """After a restart: the trials left RUNNING by a driver that died. A job that still exists
    is followed from the start of its log (results already reported are not reported again);
    a trial without a job failed to start and is closed."""
    import optuna

    from lanenb.jobs import JobNotFoundError, get_job

    running: dict[int, _Running] = {}
    for frozen in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        trial = optuna.trial.Trial(study, frozen._trial_id)
        name = frozen.user_attrs.get("job")
        try:
            job = get_job(name) if name else None
        except JobNotFoundError:
            job = None
        if job is None:
            trial.set_user_attr("error", "the driver stopped before its job started")
            study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
            continue
        run = _Running(trial, job, values=dict(frozen.intermediate_values))
        running[frozen.number] = run
        _log(f"trial {frozen.number}: following {name} again")
    return running


def _start(study: Any, settings: SweepSettings, space: SearchSpace, name: str) -> _Running | None:
    import optuna

    from lanenb.jobs import submit

    trial = study.ask(space.distributions())
    job_name = f"{name}-{trial.number}"
    trial.set_user_attr("job", job_name)
    try:
        spec = apply_params(TrainSpec.from_dict(settings.base), trial.params, name=job_name,
                            labels=trial_labels(name, trial.number))
        job = submit(spec)
    except Exception as exc:  # a trial that cannot start is a failed trial, not a dead sweep
        trial.set_user_attr("error", f"{type(exc).__name__}: {exc}"[:500])
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        _log(f"trial {trial.number} did not start: {exc}")
        return None
    _log(f"trial {trial.number}: {job_name} {json.dumps(trial.params)}")
    return _Running(trial, job)


def drive(name: str, *, poll_s: float = POLL_S) -> str:
    """Run the sweep ``name`` to its end (all trials settled) or until it is asked to stop.

    Each running trial is polled every ``poll_s`` seconds, or at its backend's
    ``poll_interval`` where that is slower.

    Returns:
        ``finished`` or ``stopped``.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    settings = SweepSettings.of(load_study(name))
    space = SearchSpace.from_dict(settings.space)
    study = load_study(name, make_sampler(settings.sampler, space, settings.seed),
                       make_pruner(settings.pruner, settings.min_epochs))
    objective = settings.objective_
    running = _adopt(study, objective)
    stop = stop_file(name)
    while True:
        if stop.exists():
            for run in running.values():
                run.job.cancel(reason=f"stopped with sweep {name}")
                run.trial.set_user_attr("error", "stopped with the sweep")
                study.tell(run.trial.number, state=optuna.trial.TrialState.FAIL)
            _log(f"stopped; {len(running)} running trial(s) cancelled")
            return "stopped"
        while len(running) < settings.parallel and _started(study) < settings.trials:
            if settings.sampler == "grid" and _grid_done(study):
                break
            started = _start(study, settings, space, name)
            if started is not None:
                running[started.trial.number] = started
        now = time.monotonic()
        due = {n: run for n, run in running.items() if run.due <= now}
        for run in due.values():
            run.due = now + _poll_every(run.job, poll_s)
        for number in [n for n, run in due.items() if _follow(study, run, objective)]:
            del running[number]
        if not running and (_started(study) >= settings.trials
                            or (settings.sampler == "grid" and _grid_done(study))):
            _log("finished")
            return "finished"
        time.sleep(poll_s)


def _started(study: Any) -> int:
    """Trials asked for so far (a ``first`` parameter set waits in the study until then)."""
    import optuna

    return sum(t.state != optuna.trial.TrialState.WAITING for t in study.get_trials(deepcopy=False))


def _grid_done(study: Any) -> bool:
    sampler = study.sampler
    return bool(getattr(sampler, "is_exhausted", None) and sampler.is_exhausted(study))


def main(argv: list[str] | None = None) -> int:
    """``python -m lanenb.sweeps NAME``: what ``Sweep`` starts detached."""
    parser = argparse.ArgumentParser(prog="python -m lanenb.sweeps", description=main.__doc__)
    parser.add_argument("name")
    ns = parser.parse_args(argv)
    marker = pid_file(ns.name)
    import psutil

    me = psutil.Process()
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": me.pid, "create_time": me.create_time()}))
    tmp.replace(marker)
    try:
        outcome = drive(ns.name)
    finally:
        marker.unlink(missing_ok=True)
    stop_file(ns.name).unlink(missing_ok=True)
    _log(f"driver exits: {outcome}")
    return 0

