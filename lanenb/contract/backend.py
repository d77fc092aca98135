"""The interface every job backend implements; ``lanenb.jobs.Job`` only talks to this."""

from __future__ import annotations

import abc
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

# the one line type; every backend yields these (re-exported here: it is part of the interface)
from lanenb.contract.spec import TrainSpec
from lanenb.errors import UserError
from lanenb.launch.lines import LogLine as LogLine

if TYPE_CHECKING:
    from lanenb.contract.status import JobStatus


class RunDirGoneError(UserError, FileNotFoundError):
    """The job's run dir was deleted while the job was recorded (or still running): its log,
    checkpoints and metrics are gone, so a view of it stops and says so. The registry row and
    every other job are untouched (``lanenb jobs prune`` forgets the row)."""


class JobStateError(UserError, RuntimeError):
    """A suspend or resume that the job's state does not allow (it has ended, it is not
    suspended, it still runs); the message names the job and its state."""


@dataclass
class LogChunk:
    """Lines read from a cursor, each with the cursor that resumes right after it.

    ``cursor`` resumes after the last line; ``complete`` is True when the log had nothing
    more at the time of reading *and* the log is closed (the job's output has ended), so a
    watcher that already saw a final status can stop.
    """

    lines: list[tuple[LogLine, str]] = field(default_factory=list)
    cursor: str | None = None
    complete: bool = False


class Backend(abc.ABC):
    """Runs a ``TrainSpec`` somewhere and reports on it.

    ``submit`` returns a small JSON-able ``handle`` dict that the registry stores; every
    other method gets that handle back, so a backend instance keeps no per-job state and a
    fresh process (a restarted kernel) can pick a job up from the registry alone.
    """

    name: str = ""
    runs_here: bool = False  # True: jobs run on this machine (local paths, a local run dir)
    # True: ``datasets()`` names volumes (PVCs) that a launch form mounts for the ranks; False:
    # the spec's ``dataset`` is used as it is (a folder here, an AzureML data asset or URI)
    datasets_are_volumes: bool = False

    @classmethod
    def spec_from_dict(cls, data: dict[str, Any]) -> Any:
        """The spec of a registry row of this backend's jobs (``Job.spec``): a ``TrainSpec``,
        unless the backend runs something else (the dataset fetch Job's ``FetchSpec``)."""
        return TrainSpec.from_dict(data)

    def validate(self, spec: TrainSpec, run_dir: str | Path | None) -> None:
        """Raise ``ValueError`` for a spec this backend cannot run; called by ``submit``
        before the job is recorded, so a rejected job leaves nothing behind. Default: every
        spec is fine (an optional hook, not abstract)."""
        return None

    @abc.abstractmethod
    def submit(self, spec: TrainSpec, run_dir: str | Path | None) -> dict[str, Any]:
        """Start the job and return quickly (the notebook must stay responsive).

        ``run_dir`` is a local directory for local backends; None for remote backends
        when the spec names none (they choose an in-cluster path and return it as
        ``handle["run_dir"]``)."""

    @abc.abstractmethod
    def status(self, spec: TrainSpec, handle: dict[str, Any]) -> JobStatus:
        ...

    @abc.abstractmethod
    def logs(
        self, spec: TrainSpec, handle: dict[str, Any], *, follow: bool = False, worker: int | None = None
    ) -> Iterator[LogLine]:
        """Yield output lines; with ``follow`` keep yielding until the job ends."""

    @abc.abstractmethod
    def cancel(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        ...

    @abc.abstractmethod
    def describe(self, spec: TrainSpec, handle: dict[str, Any]) -> dict[str, Any]:
        """Everything useful for debugging the job, as plain JSON-able data."""

    def read_log(self, spec: TrainSpec, handle: dict[str, Any], cursor: str | None, *,
                 max_lines: int = 5000, tail_lines: int | None = None) -> LogChunk:
        """Non-blocking: the lines after ``cursor`` (None: from the start, or only the last
        ``tail_lines``). This default re-reads ``logs()`` and skips what the cursor (a line
        count) already delivered; backends override it with a real seek."""
        lines = list(self.logs(spec, handle, follow=False))
        start = int(cursor) if cursor else (max(0, len(lines) - tail_lines) if tail_lines else 0)
        picked = list(itertools.islice(enumerate(lines[start:], start + 1), max_lines))
        end = picked[-1][0] if picked else start
        return LogChunk([(line, str(i)) for i, line in picked], str(end), end >= len(lines))

    def capacity(self, spec: TrainSpec | None = None) -> dict[str, int]:
        """What a launch form may offer: ``processes`` (most ranks), ``gpus`` (GPUs in all),
        ``gpus_per_process`` (most GPUs one rank can get). A backend that cannot tell says 1/0/0."""
        return {"processes": 1, "gpus": 0, "gpus_per_process": 0}

    def datasets(self, spec: TrainSpec | None = None) -> list[str]:
        """Datasets a launch form can offer (local directories, or PVC names on a cluster)."""
        return []

    def stop_leftovers(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        """Stop whatever still runs of a job whose outcome is already final (rank processes a
        killed supervisor left behind). Never deletes the job or changes its recorded outcome;
        ``Job.cancel`` calls it whatever the registry says. Default: nothing to stop."""
        return None

    def can(self, capability: str) -> bool:
        """Whether this backend implements optional method ``capability`` (``"suspend"``,
        ``"resume"``) rather than inheriting the default that raises NotImplementedError."""
        return getattr(type(self), capability, None) is not getattr(Backend, capability, None)

    # the ``TrainSpec`` fields ``resume(**changes)`` may change (a relaunch reads the new spec);
    # a backend that un-pauses the job it already has (Kubernetes) can change none
    resume_changes: frozenset[str] = frozenset()

    def suspend(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        """Stop the ranks at a step boundary after a checkpoint (the preemption path), free
        their cores/GPUs and keep the job, so ``resume`` continues it. Returns once no rank
        runs. Default: this backend cannot (an optional capability)."""
        raise NotImplementedError(f"the {self.name or type(self).__name__} backend cannot suspend jobs")

    def resume(self, spec: TrainSpec, handle: dict[str, Any], *, from_checkpoint: bool = True
               ) -> dict[str, Any] | None:
        """Run a suspended (or preempted) job again from its checkpoint; ``spec`` may differ from
        the submitted one in ``resume_changes``. Returns the new handle when the job was started
        anew (a relaunch), None when the backend's own object goes on (an un-suspended MPIJob).
        Default: this backend cannot."""
        raise NotImplementedError(f"the {self.name or type(self).__name__} backend cannot resume jobs")
