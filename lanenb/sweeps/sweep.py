"""``lanenb.sweeps.sweep(...)``: many runs as one experiment, and ``Sweep``, its handle.

A sweep searches a space of job and trainer flags with Optuna, running each trial as an
ordinary lanenb job (in ``%lanejobs``, the sidebar and ``lanenb jobs list`` as
``<sweep>-<n>``), and stops the losers early. The driver runs detached; ``attach(name)``
finds the sweep again from any kernel or shell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lanenb.charts.formats import format_value
from lanenb.contract.redact import is_secret_name, is_secret_ref, redact_spec, redacted_fields
from lanenb.contract.spec import TrainSpec
from lanenb.errors import UserError
from lanenb.sweeps.driver import SweepSettings, pid_file, stop_file
from lanenb.sweeps.params import check_searchable
from lanenb.sweeps.space import SearchSpace
from lanenb.sweeps.study import (
    Objective,
    check_sweep_name,
    create_study,
    load_study,
    make_pruner,
    make_sampler,
    sweeps_dir,
)

__all__ = ["Sweep", "TrialRow", "attach", "list_sweeps", "sweep"]


@dataclass(frozen=True)
class TrialRow:
    """One trial as the trials table shows it."""

    number: int
    state: str  # running, complete, pruned, failed
    params: dict[str, Any]
    value: float | None
    epochs: int
    job: str | None
    why: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Sweep:
    """A sweep by name: its trials, its best trial, its driver.

    Everything is read from the study on each call, so two handles (two kernels) agree.
    """

    def __init__(self, name: str) -> None:
        self.name = check_sweep_name(name)
        self._study = load_study(name)  # raises SweepNotFoundError

    def __repr__(self) -> str:
        return f"Sweep({self.name!r}: {self.state}, {len(self.trials())} trial(s))"

    @property
    def settings(self) -> SweepSettings:
        return SweepSettings.of(self._study)

    @property
    def objective(self) -> Objective:
        return self.settings.objective_

    def trials(self) -> list[TrialRow]:
        """Every trial so far, in order: state, parameters, objective value (its best epoch's),
        epochs reported, job name and, for a pruned or failed trial, why."""
        rows = []
        pick = max if self.objective.direction == "maximize" else min
        for t in self._study.get_trials(deepcopy=False):
            state = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed",
                     "RUNNING": "running", "WAITING": "waiting"}.get(t.state.name, t.state.name.lower())
            values = list(t.intermediate_values.values())
            if t.value is not None:
                value: float | None = t.value
            elif values:
                value = pick(values)
            else:
                value = None
            rows.append(TrialRow(t.number, state, dict(t.params), value, len(values), t.user_attrs.get("job"),
                                 t.user_attrs.get("pruned") or t.user_attrs.get("error")))
        return rows

    def curves(self) -> dict[int, dict[int, float]]:
        """Each trial's objective per epoch (``{trial: {epoch: value}}``), for the overlaid chart."""
        return {t.number: dict(t.intermediate_values) for t in self._study.get_trials(deepcopy=False)}

    @property
    def best(self) -> dict[str, Any] | None:
        """The best finished trial: ``number``, ``job``, ``params``, ``value``; None before one."""
        return self._best_of(self.trials(), self.objective)

    def summary(self) -> dict[str, Any]:
        """The sweep as one list row (the sidebar's): ``name``, ``state``, ``trials_total``
        (asked for), ``trials_done`` (settled: complete, pruned or failed), ``trials_running``,
        ``best`` (as :attr:`best`, or None), ``objective`` (``label``, ``direction``), ``sampler``
        and ``pruner``. Trials and settings are read once, so the fields agree."""
        return self._summary_of(self.trials(), self.settings)

    def detail(self) -> dict[str, Any]:
        """:meth:`summary` plus what a trials table shows: ``params`` (the searched names),
        ``trials`` (:class:`TrialRow` dicts, waiting ones left out) and ``settings`` (space,
        sampler, pruner, counts, seed, and the base job with secret-looking values redacted)."""
        rows, settings = self.trials(), self.settings
        info = self._summary_of(rows, settings)
        info["params"] = [d["name"] for d in settings.space]
        info["trials"] = [r.to_dict() for r in rows if r.state != "waiting"]
        info["settings"] = {**settings.to_dict(), "base": redact_spec(settings.base)}
        return info

    def _summary_of(self, rows: list[TrialRow], settings: SweepSettings) -> dict[str, Any]:
        objective = settings.objective_
        return {"name": self.name, "state": self._state_of(rows, settings), "trials_total": settings.trials,
                "trials_done": sum(r.state in ("complete", "pruned", "failed") for r in rows),
                "trials_running": sum(r.state == "running" for r in rows), "best": self._best_of(rows, objective),
                "objective": {"label": objective.label, "direction": objective.direction},
                "sampler": settings.sampler, "pruner": settings.pruner}

    @staticmethod
    def _best_of(rows: list[TrialRow], objective: Objective) -> dict[str, Any] | None:
        done = [(r.value, r) for r in rows if r.state == "complete" and r.value is not None]
        if not done:
            return None
        pick = max if objective.direction == "maximize" else min
        _, row = pick(done, key=lambda pair: pair[0])
        return {"number": row.number, "job": row.job, "params": row.params, "value": row.value,
                "objective": objective.label}

    def _driver(self) -> Any:
        """The driver process when it runs (pid and start time both match), else None."""
        import psutil

        try:
            info = json.loads(pid_file(self.name).read_text())
            proc = psutil.Process(int(info["pid"]))
            if abs(proc.create_time() - float(info["create_time"])) >= 1.0:
                return None  # the pid was reused: not our driver
            if proc.status() == psutil.STATUS_ZOMBIE:  # died, and we (its parent) have not reaped it
                try:
                    os.waitpid(proc.pid, os.WNOHANG)
                except ChildProcessError:
                    pass
                return None
            return proc
        except (OSError, ValueError, KeyError, psutil.Error):
            pass
        return None

    @property
    def state(self) -> str:
        """``running`` (its driver is alive), ``finished`` (every trial settled), ``stopped``,
        ``created`` (never started: ``start()``) or ``interrupted`` (the driver died with trials
        to go: ``resume()`` continues)."""
        return self._state_of(self.trials(), self.settings)

    def _state_of(self, rows: list[TrialRow], settings: SweepSettings) -> str:
        if self._driver() is not None:
            return "stopping" if stop_file(self.name).exists() else "running"
        if any(r.why == "stopped with the sweep" for r in rows):
            return "stopped"
        started = [r for r in rows if r.state != "waiting"]
        if not started:
            return "created"
        if len(started) >= settings.trials and all(r.state != "running" for r in started):
            return "finished"
        return "interrupted"

    def start(self) -> Sweep:
        """Start the detached driver (``resume()`` after a crash: it adopts running trials and
        runs only the missing ones). Nothing happens if a driver already runs."""
        if self._driver() is not None:
            return self
        stop_file(self.name).unlink(missing_ok=True)
        log = open(sweeps_dir() / f"{self.name}.log", "ab")  # noqa: SIM115  # handed to the child
        try:
            subprocess.Popen([sys.executable, "-m", "lanenb.sweeps", self.name], stdin=subprocess.DEVNULL,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ))
        finally:
            log.close()
        deadline = time.monotonic() + 30
        while self._driver() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        return self

    resume = start

    def stop(self, timeout: float = 60) -> str:
        """Ask the driver to stop: running trials are cancelled through the Job API and the
        sweep reads ``stopped``; returns the state once the driver has gone (or ``timeout``)."""
        stop_file(self.name).write_text("stop\n")
        deadline = time.monotonic() + timeout
        while self._driver() is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.state

    def wait(self, timeout: float | None = None, poll: float = 1.0) -> str:
        """Block until the driver has ended (or ``timeout`` seconds); returns :attr:`state`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._driver() is not None and (deadline is None or time.monotonic() < deadline):
            time.sleep(poll)
        return self.state

    def table(self) -> Any:
        """The trials table (``lanenb.tables.Table``: HTML in JupyterLab, text in a console), the
        best trial marked; the title says the sweep's state and objective."""
        from lanenb.tables import Table

        rows, settings = self.trials(), self.settings  # read once: each is a query of the study
        objective = settings.objective_
        best = (self._best_of(rows, objective) or {}).get("number")
        names = [d["name"] for d in settings.space]
        body = [[f"{r.number}{' *' if r.number == best else ''}", r.state,
                 *(format_value(r.params.get(n)) for n in names), format_value(r.value), str(r.epochs),
                 format_value(r.job), r.why or ""]
                for r in rows if r.state != "waiting"]
        title = (f"sweep {self.name}: {self._state_of(rows, settings)}, {len(body)}/{settings.trials} trial(s), "
                 f"{settings.sampler} + {settings.pruner}, {objective.direction} {objective.label}")
        return Table(["trial", "state", *names, objective.label, "epochs", "job", "why"], body, title=title,
                     note="* the best finished trial" if best is not None else "", empty="(no trial yet)")

    def scaled_params(self, *, processes: int | None = None, batch_size: int | None = None,
                      rule: str = "linear") -> Any:
        """The best trial's parameters at another size, the learning rate moved by ``rule``.

        The sweep chose its ``lr`` at one global batch (``batch_size x processes``); on more GPUs,
        or with a batch that fills them, the rate that was chosen is a different run. This gives
        the rate that keeps it, and says how in one line (``str()`` of the result, also what
        ``report(processes=...)`` shows under the table).

        Args:
            processes, batch_size: the new size; None keeps the winner's.
            rule: ``linear`` (default: Goyal et al., with the winner's warm-up) or ``sqrt``.

        Returns:
            ``lanenb.sweeps.resize.ScaledParams``: ``params`` (``processes``, ``batch_size`` and
            the scaled ``lr`` set), ``lr``, ``rule`` and ``line``.

        Raises:
            UserError: no finished trial yet, an unknown rule or a size that is not a whole number >= 1.
        """
        return self._scaled(self._winner(), processes=processes, batch_size=batch_size, rule=rule)

    def _winner(self) -> dict[str, Any]:
        best = self.best
        if best is None:
            raise UserError(f"sweep {self.name} has no finished trial yet: no winner to train or scale")
        return best

    def _scaled(self, best: dict[str, Any], **size: Any) -> Any:
        from lanenb.sweeps.resize import scaled_params

        return scaled_params(TrainSpec.from_dict(self.settings.base), best["params"], **size)

    def retrain(self, *, processes: int | None = None, batch_size: int | None = None, rule: str = "linear",
                epochs: int | None = None, name: str | None = None, use_val: bool = False) -> Any:
        """Train the best trial's parameters again as a new job, by default on train + validation.

        Args:
            processes, batch_size: another size than the sweep's (another number of GPUs, a
                batch that fills them); the learning rate follows ``rule`` (``scaled_params``).
            rule: ``linear`` (default) or ``sqrt``: how the rate follows the global batch
                (``lanenb.sweeps.scaling_rule``).
            epochs: default the sweep's.
            name: the job's name (default ``<sweep>-best``).
            use_val: False (default): no validation split is held out of the training labels, so
                the frames the sweep chose on train too (a dataset's own ``val_label.json`` stays
                out); True: hold it out as the trials did.

        Returns:
            The new ``Job``, started.

        Raises:
            UserError: no finished trial yet, a bad size or rule, or a job of that name exists.
        """
        from lanenb.jobs import submit
        from lanenb.sweeps.params import RETRAIN_LABEL, SWEEP_LABEL, apply_params

        best = self._winner()
        params = dict(self._scaled(best, processes=processes, batch_size=batch_size, rule=rule).params)
        if epochs is not None:
            params["epochs"] = epochs
        base = TrainSpec.from_dict(self.settings.base)
        labels = {SWEEP_LABEL: self.name, RETRAIN_LABEL: str(best["number"])}
        spec = apply_params(base.replace(use_val=use_val), params, name=name or f"{self.name}-best", labels=labels)
        return submit(spec)

    def report(self, *, processes: int | None = None, batch_size: int | None = None, rule: str = "linear") -> Any:
        """The trials table with the sweep's chart (``SweepReport``): what ``%lanesweep`` shows.

        Args:
            processes, batch_size: asked for another size than the winner's: the table's note
                says the learning rate to train it with (``scaled_params``), the rule named.
            rule: ``linear`` (default) or ``sqrt``.

        Raises:
            UserError: a bad size or rule.
        """
        from lanenb.sweeps.report import SweepReport

        return SweepReport(self, sized=self.size_note(processes=processes, batch_size=batch_size, rule=rule))

    def size_note(self, *, processes: int | None = None, batch_size: int | None = None,
                  rule: str = "linear") -> str | None:
        """The line the sweep's views show under the trials table when asked for another size:
        ``scaled_params(...).line`` prefixed with the winner, a word when there is no winner yet,
        None when no size is asked for.

        Raises:
            UserError: a bad size or rule (checked even before a winner exists).
        """
        if processes is None and batch_size is None:
            return None
        best = self.best
        line = self._scaled(best or {"params": {}}, processes=processes, batch_size=batch_size, rule=rule).line
        if best is None:
            return "no finished trial yet: the learning rate at another size comes with the first winner"
        return f"trial {best['number']} (the best) {line}"

    def log(self) -> str:
        """The driver's own log (trials started, pruned, finished)."""
        path = sweeps_dir() / f"{self.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _check_no_literal_secrets(spec: TrainSpec) -> None:
    """A sweep stores its base job in its study (``sweeps.db``, what optuna-dashboard reads):
    refused before anything is stored when any value is a secret, by its name (``-e HF_TOKEN=...``)
    or by its shape anywhere (``HTTPS_PROXY=http://user:PASS@host``, a presigned URL in a flag)."""
    literal = [k for k, v in spec.env.items() if is_secret_name(k) and v and not is_secret_ref(v)]
    if literal:
        raise UserError(f"-e {literal[0]}=...: a sweep keeps its job in its study and never stores secret values; "
                        f"pass it as a reference (-e {literal[0]}=secret:SECRET/KEY) or set it in the environment "
                        "the ranks inherit")
    shaped = redacted_fields(redact_spec(spec.to_dict()))
    if shaped:
        raise UserError(f"{shaped[0]} holds a credential (a URL password, a signed URL's token, a key): a sweep keeps "
                        "its job in its study and never stores secret values; set it in the environment the ranks "
                        "inherit, or pass it as a reference (-e NAME=secret:SECRET/KEY)")


def _check_values(spec: TrainSpec, space: SearchSpace) -> None:
    """Every choice and both ends of every range make a valid job, checked now rather than as
    failed trials later (``--backbone small,vgg99``)."""
    from lanenb.sweeps.params import apply_params

    for dim in space.dimensions:
        for value in dim.choices or (dim.low, dim.high):
            try:
                apply_params(spec, {dim.name: value}, name="sweep-check")
            except UserError as exc:
                raise UserError(f"--{dim.name.replace('_', '-')} {dim.text()}: {value!r} is not a valid value: "
                                f"{exc}") from None


def _check_capacity(spec: TrainSpec, space: SearchSpace, parallel: int) -> None:
    from lanenb.jobs import get_backend

    def most(name: str, fixed: int) -> int:
        dim = next((d for d in space.dimensions if d.name == name), None)
        if dim is None:
            return fixed
        return int(max(dim.choices) if dim.kind == "choice" else dim.high)  # type: ignore[arg-type]

    processes, gpus = most("processes", spec.processes), most("gpus", spec.gpus)
    cap = get_backend(spec.backend).capacity(spec)
    if parallel * processes > cap["processes"]:
        raise UserError(f"parallel={parallel} trials x {processes} process(es) = {parallel * processes} ranks, but "
                        f"the {spec.backend} backend offers {cap['processes']}: lower parallel or processes")
    if gpus and parallel * processes * gpus > cap["gpus"]:
        raise UserError(f"parallel={parallel} trials x {processes} process(es) x {gpus} GPU(s) needs "
                        f"{parallel * processes * gpus} GPUs; the {spec.backend} backend has {cap['gpus']}")


def sweep(spec: TrainSpec, space: Mapping[str, Any], *, name: str | None = None, objective: str = "val.accuracy",
          direction: str | None = None, trials: int = 8, parallel: int = 1, sampler: str = "tpe",
          pruner: str = "asha", min_epochs: int = 1, seed: int | None = None,
          first: list[Mapping[str, Any]] | None = None, start: bool = True) -> Sweep:
    """Search ``space`` around ``spec``: ``trials`` jobs, ``parallel`` at a time, the losers
    stopped early.

    Args:
        spec: the base job (dataset, processes, backend...); each trial is this job with its
            parameters applied, named ``<sweep>-<n>``.
        space: ``{flag: values}``: ``"1e-3..1e-1:log"``, ``"0..100:int"``, ``"4,8,16"`` or a
            list; a flag is a job field (``batch_size``, ``processes``...) or a trainer flag (``lr``...).
        name: the sweep's name (default ``sweep-<time>``).
        objective: a validation metric of the trials' eval events, ``val.accuracy`` by default.
        direction: ``maximize`` or ``minimize`` (default: maximize accuracy, minimize others).
        trials: how many trials in all (pruned and failed ones count).
        parallel: trials at once; checked against the backend's capacity.
        sampler: ``tpe`` (default), ``random`` or ``grid`` (lists only).
        pruner: ``asha`` (successive halving, default), ``median`` or ``none``.
        min_epochs: validation results a trial gets before it can be pruned.
        seed: the sampler's seed, for a repeatable search.
        first: parameter sets to try first (a known-good run, the paper's values); the
            sampler takes over after them.
        start: start the detached driver now (False: create the sweep only; ``.start()`` later).

    Returns:
        The :class:`Sweep`, its driver running.

    Raises:
        UserError: a bad space, objective, sampler, pruner or count (the message names it), a
            name already used, more ranks than the backend offers, or a literal secret in ``env``.
    """
    if not isinstance(spec, TrainSpec):
        raise UserError(f"sweep() takes a TrainSpec as its base job, got {type(spec).__name__}")
    name = check_sweep_name(name or time.strftime("sweep-%Y%m%d-%H%M%S"))
    parsed = SearchSpace.parse(space)
    check_searchable(parsed)
    goal = Objective.parse(objective, direction)
    for label, value, low in (("trials", trials, 1), ("parallel", parallel, 1), ("min_epochs", min_epochs, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise UserError(f"{label}={value!r}: must be a whole number >= {low}")
    if not spec.use_val:
        raise UserError(f"objective {goal.label} needs validation results: the base job has use_val=False (--no-val)")
    if sampler == "grid" and parsed.size() is not None and trials > parsed.size():  # type: ignore[operator]
        trials = int(parsed.size())  # type: ignore[arg-type]  # a grid has no more points than this
    for params in first or []:
        unknown = sorted(set(params) - set(parsed.names)) if isinstance(params, Mapping) else ["?"]
        if unknown:
            raise UserError(f"first={params!r}: {unknown[0]!r} is not in the search space ({', '.join(parsed.names)})")
    _check_no_literal_secrets(spec)
    _check_values(spec, parsed)
    _check_capacity(spec, parsed, parallel)
    settings = SweepSettings(base=spec.to_dict(), space=parsed.to_dict(), objective=goal.__dict__, trials=trials,
                             parallel=parallel, sampler=sampler, pruner=pruner, min_epochs=min_epochs, seed=seed)
    study = create_study(name, goal.direction, make_sampler(sampler, parsed, seed), make_pruner(pruner, min_epochs))
    study.set_user_attr("lanenb", settings.to_dict())
    for params in first or []:
        study.enqueue_trial(dict(params))
    handle = Sweep(name)
    return handle.start() if start else handle


def attach(name: str) -> Sweep:
    """The sweep ``name``, from any kernel or shell (the driver keeps running meanwhile).

    Raises:
        SweepNotFoundError: no sweep of that name; the message lists those there are.
    """
    return Sweep(name)


def list_sweeps() -> list[str]:
    """The names of this home's sweeps, oldest first."""
    from lanenb.home import lanenb_home

    if not (lanenb_home() / "sweeps" / "sweeps.db").exists():
        return []  # no sweep yet: neither Optuna's import nor an empty database for a mere look
    import optuna

    from lanenb.sweeps.study import storage_url

    return [s.study_name for s in optuna.get_all_study_summaries(storage_url(), include_best_trial=False)]
