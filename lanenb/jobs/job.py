"""``Job``: the handle users hold in a notebook, whatever backend runs the job.

A ``Job`` holds no live process objects: everything it needs is in the registry row, so
``get_job(name)`` in a restarted kernel gives an equally capable object.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lanenb.contract.backend import Backend, JobStateError, LogChunk, LogLine
from lanenb.contract.backends import get_backend
from lanenb.contract.redact import (
    REDACTED,
    fingerprints,
    inherited_secrets,
    redact_line,
    redact_output,
    redact_spec,
    redact_status,
    redact_text,
)
from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState, JobStatus
from lanenb.errors import SpecError, UserError
from lanenb.home import default_run_dir
from lanenb.jobs.updates import Update, UpdateBatch
from lanenb.jobs.updates import poll as _poll
from lanenb.jobs.updates import read_log as _read_log
from lanenb.registry.jobs import JOB_FILE, JobExistsError, JobNotFoundError, JobRecord, JobRegistry
from lanenb_trainer.atomic import write_json
from lanenb_trainer.evaluation.headline import from_metrics
from lanenb_trainer.events import Event, parse_line
from lanenb_trainer.tensorboard_log import tensorboard_dir

__all__ = ["Job", "submit", "get_job", "list_jobs", "default_run_dir", "JobStateError"]

# the states a job can be suspended in and resumed from: the one rule for every face's buttons
SUSPENDABLE = frozenset({JobState.PENDING, JobState.RUNNING, JobState.RESTARTING})
RESUMABLE = frozenset({JobState.SUSPENDED, JobState.PREEMPTED})

# a registry row read this recently is used as it is by status() and metrics: a table of many
# jobs reads each row once, not three times; every write is still checked against the row in
# the registry (``JobRegistry.update`` never overwrites a final state)
FRESH_S = 0.2
# a resume's claim on the registry row: readers leave the job to the resume for this long (it
# starts a new supervisor; the old handle reads "lost" until the row holds the new one); a claim
# older than this is a resume that died half-way, and the backend is asked again
RESUMING_REASON = "resuming from the last checkpoint"
CLAIM_S = 120.0


_WARNED_METRICS: set[tuple[str, float]] = set()  # (path, mtime) of unreadable metrics.json already reported


def _read_metrics(run_dir: str | None) -> dict[str, Any] | None:
    """The run's ``metrics.json``; None while it is missing, and None with one warning when it
    is not JSON (half-written by a run killed mid-write, cut short by a full disk): nothing is
    recorded from it, so the views show the figures of the log's ``eval`` events instead and a
    repaired file is read on the next call."""
    if not run_dir:
        return None
    path = Path(run_dir) / "metrics.json"
    try:
        text = path.read_text()
        data = json.loads(text)
    except OSError:
        return None
    except ValueError as exc:
        try:
            key = (str(path), path.stat().st_mtime)
        except OSError:
            return None
        if key not in _WARNED_METRICS:
            _WARNED_METRICS.add(key)
            warnings.warn(f"{path} is not valid JSON ({exc}; {len(text)} bytes: half-written?): its figures are "
                          f"ignored and the views show those of the job's log events; move the file aside "
                          f"(or restore it from a snapshot) to silence this", RuntimeWarning, stacklevel=3)
        return None
    return data if isinstance(data, dict) else {"value": data}


class Job:
    """A submitted training (or dataset fetch) job: status, logs, events, wait, cancel.

    Get one from ``submit``, ``get_job`` or ``list_jobs`` rather than building it: the handle
    is rebuilt from its registry row each time, which is why it survives a kernel restart and
    why two kernels holding the same job see the same recorded state.
    """

    def __init__(self, record: JobRecord, registry: JobRegistry | None = None,
                 backend: Backend | None = None) -> None:
        self._registry = registry or JobRegistry()
        self._record = record
        self._read_at = time.monotonic()  # when ``record`` was read from the registry
        self.name = record.name
        self._spec: TrainSpec | None = None
        self._backend = backend

    @property
    def spec(self) -> TrainSpec:
        """Parsed on first use, so listing jobs never fails on one odd old record; by the
        backend, whose jobs may run another spec (``FetchSpec`` for dataset fetch Jobs)."""
        if self._spec is None:
            parse = getattr(self.backend, "spec_from_dict", TrainSpec.from_dict)
            self._spec = parse(self._record.spec)
        return self._spec

    # ---------------------------------------------------------------- plumbing
    @property
    def backend(self) -> Backend:
        """The backend that runs this job, looked up by the name recorded at submit."""
        if self._backend is None:
            self._backend = get_backend(self._record.backend)
        return self._backend

    @property
    def created(self) -> float | None:
        """When the job was submitted (UNIX seconds)."""
        return self._record.created

    @property
    def backend_name(self) -> str:
        """``"local"``, ``"kubernetes"``, ...: the name the job was submitted with."""
        return self._record.backend

    @property
    def run_dir(self) -> str | None:
        """Where the ranks write checkpoints, events and ``metrics.json``; for a Kubernetes job
        a path inside the cluster (on its volume), not on this machine."""
        return self._record.run_dir

    @property
    def tensorboard_dir(self) -> str | None:
        """The TensorBoard log dir, ``<run dir>/tensorboard`` (``%tensorboard --logdir
        {job.tensorboard_dir}``); like ``run_dir``, a path inside the cluster for a Kubernetes
        job. ``None`` for a job without a run dir (a dataset fetch)."""
        run_dir = self._record.run_dir
        return str(tensorboard_dir(run_dir)) if run_dir else None

    @property
    def handle(self) -> dict[str, Any]:
        """What the backend needs to find the job again (pid, MPIJob name and namespace); a copy,
        so changing it cannot corrupt the registry row."""
        return dict(self._record.handle)

    @property
    def metrics(self) -> dict[str, Any] | None:
        """Final metrics (``metrics.json`` of the run dir), once the job has finished.

        ``test`` is the last model's result and ``test_best`` ``best.pt``'s; ``headline`` says
        which one is the run's figure and labels it ("best.pt, epoch 6", with the last model's
        beside it as ``other``): the figure every view shows. Files written before the trainer
        wrote ``headline`` get it computed by the same rule (none when they hold no figure)."""
        self._refresh(max_age=FRESH_S)
        if self._record.metrics is None:
            if not JobState(self._record.state).finished:
                self.status()  # records the metrics if the job has just ended
            elif (metrics := _read_metrics(self._record.run_dir)) is not None:
                self._registry.update(self.name, metrics=metrics)
                self._refresh()
        metrics = self._record.metrics
        if isinstance(metrics, dict) and "headline" not in metrics:
            found = from_metrics(metrics)
            if found is not None:  # metrics without a test or validation figure stay as written
                metrics = {**metrics, "headline": found.to_dict()}
        return metrics

    def _refresh(self, max_age: float = 0.0) -> None:
        """Read the registry row again, unless it was read less than ``max_age`` seconds ago
        (a list of jobs just read: its status and metrics need not read each row twice more)."""
        if max_age > 0 and time.monotonic() - self._read_at < max_age:
            return
        self._record = self._registry.get(self.name)
        self._read_at = time.monotonic()

    # ---------------------------------------------------------------- API
    def status(self) -> JobStatus:
        """The job's state now, with a reason a person can act on when it is stuck or failed.

        Asks the backend unless the registry already holds a final state (a finished job is
        never asked again, so a deleted MPIJob cannot turn SUCCEEDED into LOST), and records
        what it saw, so other kernels and ``list_jobs`` agree.

        Returns:
            A ``JobStatus``: ``state`` (a ``JobState``), ``reason``, ``started``/``finished``.

        Raises:
            JobNotFoundError: the job was removed from the registry meanwhile.
        """
        self._refresh(max_age=FRESH_S)
        rec = self._record
        if JobState(rec.state).finished and rec.status:
            return JobStatus.from_dict(rec.status)
        if self._claimed_by_resume(rec):  # never finalised from the previous attempt's handle
            return JobStatus.from_dict(rec.status)
        status = self._backend_status()
        fields: dict[str, Any] = {"state": status.state.value, "status": status.to_dict()}
        if status.started and not rec.started:
            fields["started"] = status.started
        if status.state.finished:
            fields["finished"] = status.finished or time.time()
            metrics = _read_metrics(rec.run_dir)
            if metrics is not None:
                fields["metrics"] = metrics
        if status.state.value != rec.state or status.to_dict() != rec.status or "metrics" in fields:
            written = self._registry.update(self.name, **fields)
            self._refresh()
            if not written:  # another kernel recorded a final state meanwhile: that one stands
                return self._recorded_status()
        return status

    def logs(self, follow: bool = False, worker: int | None = None) -> Iterator[LogLine]:
        """The ranks' output lines, from the start.

        Args:
            follow: keep yielding new lines until the job ends (like ``tail -f``); False stops at
                the end of what has been written so far.
            worker: only this rank's lines; ``None`` for all ranks, interleaved as written.

        Returns:
            An iterator of ``LogLine`` (``rank``, ``text``, ``source``); for a notebook view
            that resumes where it left off, use ``poll``/``updates`` instead.
        """
        env = self._env()
        return (redact_line(line, env) for line in
                self.backend.logs(self.spec, self._record.handle, follow=follow, worker=worker))

    def read_log(self, cursor: str | None = None, *, max_lines: int = 5000,
                 tail_lines: int | None = None) -> LogChunk:
        """The log lines after ``cursor`` without blocking (``Backend.read_log``), redacted: a
        rank that prints a secret shows ``<redacted>`` whichever backend ran it.

        Args:
            cursor: None from the start (or the last ``tail_lines``); else a chunk's ``cursor``.
            max_lines: the most lines returned.
            tail_lines: with ``cursor=None``, only the last this many.
        """
        return _read_log(self, cursor, max_lines=max_lines, tail_lines=tail_lines)

    def _env(self) -> dict[str, Any] | None:
        """The spec's variables, whose secret values redaction looks for (a fetch spec has none)."""
        return getattr(self.spec, "env", None)

    @staticmethod
    def _claimed_by_resume(rec: JobRecord) -> bool:
        """Whether a resume (in this or another process) is changing the job now: its row reads
        RESTARTING with the resume's reason, written less than ``CLAIM_S`` ago."""
        return (rec.state == JobState.RESTARTING.value and (rec.status or {}).get("reason") == RESUMING_REASON
                and time.time() - rec.updated < CLAIM_S)

    def _backend_status(self) -> JobStatus:
        """The backend's status, redacted before anything stores or shows it (the one seam:
        a rank's error message copied into a reason must not reach the registry raw)."""
        return redact_status(self.backend.status(self.spec, self._record.handle), self._env())

    def events(self, follow: bool = False) -> Iterator[Event]:
        """The trainer's structured events (``@lanenb`` lines: step, eval, checkpoint, end ...).

        Parsed from ``logs`` with the same parser for every backend, so a chart built on them
        works for local and Kubernetes jobs alike.

        Args:
            follow: keep yielding until the job ends; False stops at what has been written.

        Returns:
            An iterator of ``lanenb_trainer.events.Event``; lines that are not events are skipped.
        """
        for line in self.logs(follow=follow):
            event = parse_line(line.text)
            if event is not None:
                yield event

    def poll(self, cursor: str | None = None, *, max_lines: int = 5000,
             tail_lines: int | None = None) -> UpdateBatch:
        """What happened since ``cursor``, without blocking: a status change, then new log
        lines with their parsed ``@lanenb`` events.

        Args:
            cursor: ``None`` for the whole history, or ``batch.cursor`` / ``update.cursor``
                from an earlier call (in this kernel or another one) to continue from there.
            max_lines: the most log lines returned at once (call again for the rest).
            tail_lines: with ``cursor=None``, start at the last ``tail_lines`` lines instead of
                the beginning (a cheap look at a long log, e.g. for a table of many jobs).

        Returns:
            An ``UpdateBatch``: ``updates``, the ``cursor`` to pass next time, and ``final``
            (True once the job has finished and every line was delivered).

        Raises:
            SpecError: ``cursor`` is not one this API returned.
        """
        return _poll(self, cursor, max_lines=max_lines, tail_lines=tail_lines)

    def updates(self, cursor: str | None = None, *, follow: bool = True, interval: float = 0.5
                ) -> Iterator[Update]:
        """Iterate over ``poll`` batches: the history after ``cursor``, then (with ``follow``)
        the live tail until the job is final. Each update's ``cursor`` resumes after it.

        Args:
            cursor: where to start (see ``poll``); ``None`` for the whole history.
            follow: wait for new output until the job is final; False stops after the history.
            interval: seconds between polls while nothing new arrives.

        Returns:
            An iterator of ``Update`` (a status change, or log lines with their events).

        Raises:
            SpecError: ``cursor`` is not one this API returned.
        """
        while True:
            batch = self.poll(cursor)
            yield from batch.updates
            cursor = batch.cursor
            if batch.final or not follow:
                return
            if not batch.updates:
                time.sleep(interval)

    def wait(self, timeout: float | None = None, poll: float = 0.5) -> JobStatus:
        """Block until the job finishes, or is suspended.

        Args:
            timeout: the most seconds to wait; ``None`` waits as long as it takes.
            poll: seconds between status checks.

        Returns:
            The final status (succeeded, failed, cancelled, lost), or the SUSPENDED status: a
            suspended job does nothing until someone calls ``resume()``, so waiting longer
            would hang; check ``status.state`` before reading results.

        Raises:
            TimeoutError: still going after ``timeout`` seconds.
            ValueError: ``timeout`` is negative.
        """
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout={timeout!r}: must be >= 0 seconds or None")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status()
            if status.state.finished or status.state == JobState.SUSPENDED:
                return status
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"job {self.name!r} is still {status.state.value} after {timeout:g} s; "
                    f"call wait() again, or cancel() it"
                )
            delay = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
            time.sleep(delay)

    def cancel(self, reason: str | None = None) -> JobStatus:
        """Stop the job and record it as cancelled, unless it has already ended.

        The live state is read first: a job that has just succeeded or failed keeps that
        outcome (its MPIJob is not deleted, no "cancelled" is recorded). Whatever the recorded
        state, anything of the job still running (ranks a killed supervisor left behind) is
        stopped.

        Args:
            reason: why, recorded as the status's reason (a sweep's "pruned at epoch 2: ...");
                default "cancelled by user", or the backend's own words.

        Returns:
            The job's final status (the recorded one when it had already ended).
        """
        self._refresh()
        if not JobState(self._record.state).finished:
            live = self.status()  # records a final state the backend already reached
            if not live.state.finished:
                self.backend.cancel(self.spec, self._record.handle)
                status = self._backend_status()
                # still stopping (a backend that deletes asynchronously), or already gone: a
                # Kubernetes job with no pod yet is deleted at once and reads LOST, but it was us
                if not status.state.finished or status.state is JobState.LOST:
                    status = JobStatus(JobState.CANCELLED, reason=reason or "cancelled by user",
                                       started=status.started, finished=time.time())
                elif reason:
                    status = dataclasses.replace(status, reason=reason, message=status.reason or status.message)
                self._registry.update(self.name, state=status.state.value, status=status.to_dict(),
                                      finished=status.finished or time.time())
                self._refresh()
        self.backend.stop_leftovers(self.spec, self._record.handle)
        return self._recorded_status()

    def _recorded_status(self) -> JobStatus:
        rec = self._record
        return JobStatus.from_dict(rec.status) if rec.status else JobStatus(JobState(rec.state))

    def snapshots(self) -> list[Any]:
        """The snapshots this job made (``--snapshot``): its run dir and dataset.

        Returns:
            ``lanenb.snapshots.Snapshot`` objects, oldest first; ones deleted since are left out
            (a deleted snapshot is not an error here: the list is what can still be restored).

        Raises:
            SnapshotError: a snapshot store cannot be reached (restic missing, cluster down).
        """
        from lanenb.snapshots import SnapshotNotFoundError, get_store

        out = []
        for link in self._registry.snapshot_links(self.name):
            try:
                opts = {} if link["store"] == "local" else {"namespace": self.spec.namespace}
                out.append(get_store(link["store"], **opts).get(link["snapshot"]))
            except SnapshotNotFoundError:
                continue
        from lanenb.contract.backends import get_descriptor

        ranks_store = get_descriptor(self.spec.backend).capabilities.snapshot_store
        if ranks_store and self.spec.enable_snapshot:
            # made where the job ran by the trainer's rank 0 (lanenb_trainer.k8s_snapshot), labelled with the job
            known = {s.id for s in out}
            namespace = (self._record.handle or {}).get("namespace") or self.spec.namespace or "default"
            store = get_store(ranks_store, namespace=namespace)
            out += [s for s in store.list(labels={"job": self.name}) if s.id not in known]
        return out

    def suspend(self) -> JobStatus:
        """Stop the ranks but keep the job, to free the cores/GPUs and ``resume()`` later.

        The ranks stop as a preemption stops them: each checkpoints at the next step boundary,
        so a resume loses no step. A suspend is a person's choice: the local backend's
        ``max_restarts`` never answers it with a restart.

        Returns:
            The status after the stop: SUSPENDED (locally at once; on Kubernetes once the
            operator has deleted the pods), or SUCCEEDED when the run ended first.

        Raises:
            JobStateError: the job has already ended (its state is named).
            NotImplementedError: the backend cannot suspend (AzureML).
            KubernetesError: the MPIJob is gone, or the cluster refused the change.
        """
        if not self.backend.can("suspend"):
            self.backend.suspend(self.spec, self._record.handle)  # the backend's own NotImplementedError
        state = self.status().state
        if state not in SUSPENDABLE:
            raise JobStateError(f"job {self.name!r} is {state.value}: only a pending or running job can be suspended")
        self.backend.suspend(self.spec, self._record.handle)
        return self.status()

    def resume(self, from_checkpoint: bool = True, **changes: Any) -> JobStatus:
        """Run a suspended (or preempted) job again, from its checkpoint, optionally changed.

        Works on a ``Job`` from ``get_job`` in a new kernel, after the machine restarted: the
        registry row and the run dir hold everything. The trainer continues from
        ``<run_dir>/checkpoints/last.pt`` (the job's ``--run-id``) and says so in a ``resumed``
        event; the new ranks' ``start`` event carries the changed settings, so the doctor's next
        verdict judges them.

        Args:
            from_checkpoint: continue from the last checkpoint (the default). False starts over
                from step 0 in the same run dir, on Kubernetes only (for a job suspended before
                its first checkpoint); a local run always continues from its own checkpoint.
            **changes: ``TrainSpec`` fields to change for the rest of the run, where the backend
                relaunches (``Backend.resume_changes``; locally ``num_workers``, the loader
                workers per rank, and ``processes``: a checkpoint of another rank count is the
                trainer's to accept or refuse). ``job.resume(num_workers=6)`` applies the
                doctor's "loader workers 2 -> try 6".

        Returns:
            The status right after the resume (RUNNING locally, PENDING or RUNNING on a cluster).

        Raises:
            SpecError: a change names an unknown setting, one the backend cannot change on
                resume, or a bad value (``num_workers=-1``).
            JobStateError: the job is not suspended or preempted (its state is named).
            NotImplementedError: the backend cannot resume jobs.
            KubernetesError: the job is gone or not suspended.
        """
        if not self.backend.can("resume"):
            self.backend.resume(self.spec, self._record.handle, from_checkpoint=from_checkpoint)  # its own error
        spec = self.resume_spec(**changes)
        old = self.status()
        if old.state not in RESUMABLE:
            raise JobStateError(f"job {self.name!r} is {old.state.value}: only a suspended or preempted job can be "
                                f"resumed")
        claimed = JobStatus(JobState.RESTARTING, reason=RESUMING_REASON)
        if not self._registry.reopen(self.name, [s.value for s in RESUMABLE], state=claimed.state.value,
                                     status=claimed.to_dict()):
            self._refresh()
            raise JobStateError(f"job {self.name!r} is {self._record.state}: resumed from elsewhere meanwhile?")
        try:
            handle = self.backend.resume(spec, self._record.handle, from_checkpoint=from_checkpoint)
        except BaseException:
            self._registry.reopen(self.name, [claimed.state.value], state=old.state.value, status=old.to_dict())
            self._refresh()
            raise
        stored = {**self._record.spec, **changes}
        fields: dict[str, Any] = {"spec": stored, "finished": None, "metrics": None}
        if handle is not None:  # relaunched: a new supervisor, running now
            fields.update(handle=handle, state=JobState.RUNNING.value, status=JobStatus(JobState.RUNNING).to_dict())
        else:  # the backend resumes the same handle (an MPIJob un-suspended): the claim ends, readers ask it
            fields.update(status=JobStatus(JobState.RESTARTING, reason="resumed from the last checkpoint").to_dict())
        self._registry.reopen(self.name, [claimed.state.value, *(s.value for s in RESUMABLE)], **fields)
        self._spec = spec
        self._refresh()
        if handle is not None and self.backend.runs_here and self.run_dir:
            _keep_record(self._record)
        return self.status()

    def apply_change(self, setting: str, value: Any) -> JobStatus:
        """The doctor's advice as one action (its verdict's ``change``): check ``setting=value``
        while the run still runs, suspend it at a step boundary (unless it is already suspended
        or preempted) and resume it from that checkpoint with the change. The sidebar's and the
        live view's Apply.

        Returns:
            The status after the resume.

        Raises:
            SpecError: a setting or value ``resume`` refuses (checked before anything stops).
            JobStateError: the job has ended.
        """
        self.resume_spec(**{setting: value})  # a bad change is refused while the run still runs
        if self.status().state not in RESUMABLE:
            self.suspend()
        return self.resume(**{setting: value})

    def resume_spec(self, **changes: Any) -> TrainSpec:
        """The spec ``resume(**changes)`` would run, checked without stopping or starting anything
        (a button checks its change before it suspends the run). Secret variables the registry
        holds redacted are taken from this process's environment (their values are never stored).

        Raises:
            SpecError: an unknown setting, one the backend cannot change on resume, a bad value
                (``processes`` above what the backend runs).
            UserError: the backend's pre-submit check refuses the changed spec.
            JobStateError: a secret variable is not set in this process's environment.
        """
        fields = {f.name for f in dataclasses.fields(TrainSpec)}
        unknown = sorted(set(changes) - fields)
        if unknown:
            raise SpecError(unknown[0], changes[unknown[0]],
                            f"not a TrainSpec setting; resume() can change {sorted(self.backend.resume_changes)}")
        refused = sorted(set(changes) - self.backend.resume_changes)
        if refused:
            allowed = sorted(self.backend.resume_changes) or "nothing"
            raise SpecError(refused[0], changes[refused[0]],
                            f"the {self.backend_name} backend cannot change it on resume (it can change {allowed})")
        spec = self.spec
        env = dict(spec.env)
        for key, value in spec.env.items():
            if REDACTED in str(value):
                if key not in os.environ:
                    raise JobStateError(f"env {key!r} is a secret the registry keeps only as {REDACTED}: set it in "
                                        f"this process's environment (os.environ[{key!r}]) to resume here")
                env[key] = os.environ[key]
        spec = spec.replace(env=env, **changes) if env != spec.env or changes else spec
        if changes:  # what submit checks (e.g. ranks this machine can run), before anything stops
            self.backend.validate(spec, self.run_dir)
        return spec

    def describe(self) -> dict[str, Any]:
        """Everything known about the job, for debugging or a bug report.

        Returns:
            The registry row (spec with secret values redacted, state, times, metrics, handle)
            and ``backend_detail`` from the backend (MPIJob, pods, events); a backend that cannot
            answer gives ``{"error": ...}`` there instead of hiding the rest.
        """
        self._refresh()
        rec = self._record
        info = {
            "name": rec.name, "backend": rec.backend, "state": rec.state,
            "status": redact_output(rec.status, self._env()),  # rows of older versions held raw reasons
            "run_dir": rec.run_dir, "created": rec.created, "started": rec.started,
            "finished": rec.finished, "metrics": rec.metrics, "handle": rec.handle,
            "spec": redact_spec(rec.spec),  # rows written before redaction existed may hold values
        }
        try:
            info["backend_detail"] = redact_output(self.backend.describe(self.spec, rec.handle), self._env())
        except Exception as exc:  # describe is for debugging: report, never hide the rest
            info["backend_detail"] = {"error": redact_text(f"{type(exc).__name__}: {exc}", self._env())}
        return info

    def __repr__(self) -> str:
        return f"<Job {self.name} backend={self._record.backend} state={self._record.state}>"


# -------------------------------------------------------------------- module API
def submit(spec: TrainSpec, *, registry: JobRegistry | None = None, **backend_opts: Any) -> Job:
    """Record the job, start it on its backend and return at once.

    The job is recorded before it starts, so a kernel that dies right after ``submit`` still
    finds it with ``get_job``; a start that fails is recorded as FAILED with the reason.

    Args:
        spec: a ``TrainSpec``, or another spec with ``name``, ``backend`` and ``to_dict()``
            that its backend runs (``lanenb.datasets.FetchSpec``: the dataset fetch Job).
        registry: the job registry to record in; default the one under ``lanenb_home()``.
        **backend_opts: passed to the backend's constructor (e.g. ``kubeconfig=``).

    Returns:
        The ``Job``, already running (local) or pending (Kubernetes).

    Raises:
        TypeError: ``spec`` is not a spec.
        BackendError: no backend of that name.
        UserError: the backend refused the spec (``validate``: dataset missing, no cluster ...).
        JobExistsError: a job of that name exists (choose another ``name``, or delete it).
    """
    if not isinstance(spec, TrainSpec) and not (getattr(spec, "name", None) and getattr(spec, "backend", None)
                                                and callable(getattr(spec, "to_dict", None))):
        raise TypeError(f"submit() takes a TrainSpec, got {type(spec).__name__}")
    registry = registry or JobRegistry()
    backend = get_backend(spec.backend, **backend_opts)
    assert spec.name is not None  # generated in __post_init__
    name: str = spec.name
    local = backend.runs_here
    if local and not Path(spec.dataset).expanduser().is_absolute():
        # the ranks run in the run dir, not in the notebook's folder: pin what the user meant
        spec = spec.replace(dataset=str(Path(spec.dataset).expanduser().resolve()))
    stored = spec.to_dict()
    if local:
        run_dir: str | None = str(Path(spec.run_dir).expanduser().resolve() if spec.run_dir
                                  else default_run_dir(name))
        stored["run_dir"] = run_dir  # pinned, so a re-attached Job sees the same directory
    else:
        run_dir = getattr(spec, "run_dir", None)  # a path inside the cluster: never expanded here
    backend.validate(spec, run_dir)
    if local:  # local ranks inherit this process's environment: its secrets are theirs to print
        fingerprints().add(inherited_secrets())
    try:
        record = registry.add(name, spec.backend, stored, run_dir)
    except JobExistsError:
        old = registry.get(name)
        if not (old.state == JobState.FAILED.value and not old.handle):
            raise
        registry.delete(name)  # an earlier attempt that never started: let the name be reused
        record = registry.add(name, spec.backend, stored, run_dir)
    job = Job(record, registry, backend)
    job._spec = spec
    try:
        handle = backend.submit(spec, run_dir)
    except BaseException as exc:
        status = JobStatus(JobState.FAILED, reason=f"submit failed: {exc}", finished=time.time())
        registry.update(name, state="failed", status=status.to_dict(), finished=status.finished)
        raise
    registry.update(name, handle=handle, state=(JobState.RUNNING if local else JobState.PENDING).value,
                    started=time.time() if local else None,
                    run_dir=run_dir or (handle or {}).get("run_dir"))  # in-cluster path for remote jobs
    job._refresh()
    if local and run_dir:
        _keep_record(job._record)
    return job


def _keep_record(record: JobRecord) -> None:
    """A copy of a local job's registry row in its run dir (``job.json``): what ``lanenb jobs
    repair`` rebuilds a damaged registry from. Best effort: the job runs whether or not it fits."""
    try:
        write_json(Path(record.run_dir or ".") / JOB_FILE, dataclasses.asdict(record))
    except OSError:
        pass


def get_job(name: str, *, registry: JobRegistry | None = None) -> Job:
    """The job of that name, as submitted from this or any earlier kernel.

    Args:
        name: the job's name (``TrainSpec.name``, shown by ``list_jobs`` and ``lanenb jobs``).
        registry: the job registry to read; default the one under ``lanenb_home()``.

    Returns:
        A ``Job`` as capable as the one ``submit`` returned (logs, wait, cancel ...).

    Raises:
        JobNotFoundError: no job of that name.
    """
    registry = registry or JobRegistry()
    return Job(registry.get(name), registry)


def list_jobs(*, registry: JobRegistry | None = None, newest_first: bool = False,
              limit: int | None = None) -> list[Job]:
    """Recorded jobs, whatever their backend or state.

    Args:
        registry: the job registry to read; default the one under ``lanenb_home()``.
        newest_first: newest first (what every list view shows) instead of oldest first.
        limit: at most this many, counted from the start of that order: with ``newest_first``
            the newest ``limit`` jobs (``%lanejobs --limit 20``), without it the oldest.

    Returns:
        ``Job`` handles ordered by creation time (then name); their specs are parsed only when
        used, so one odd old row cannot break the listing.

    Raises:
        UserError: ``limit`` is not an integer >= 1.
    """
    registry = registry or JobRegistry()
    try:
        records = registry.list(newest_first=newest_first, limit=limit)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return [Job(rec, registry) for rec in records]


__all__ += ["JobExistsError", "JobNotFoundError"]
