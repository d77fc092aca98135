"""``to_mlflow``: a finished lanenb run as an MLflow run (params, metric series, the model file).

Written with MLflow's own client (``mlflow.tracking.MlflowClient``, from ``mlflow-skinny``), so
any tracking URI MLflow takes works: ``http(s)://`` servers, ``sqlite:///mlflow.db``,
``databricks``. The run is built from the finished job (``record.py``) and written in batches
(``log_batch``: MLflow takes at most 1000 metrics and 100 params per call). The checkpoint goes
up as a plain artifact: ``mlflow.pytorch.log_model`` would load and pickle the model and resolve
a Python environment, seconds to minutes for a file that ``lanenb predict`` and
``lanenb_trainer.inference.Predictor`` already read as it is.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from lanenb.contract.redact import redact_output
from lanenb.errors import LanenbError, UserError
from lanenb.jobs import Job, JobState
from lanenb.trackers.jobref import job_of
from lanenb.trackers.record import RunRecord, run_record

__all__ = ["to_mlflow", "MlflowExport", "NotFinishedError", "AlreadyExportedError", "MlflowExportError",
           "DEFAULT_EXPERIMENT"]

DEFAULT_EXPERIMENT = "lanenb"
# MLflow's documented limits: per log_batch call, and on a param value's length
_MAX_METRICS, _MAX_PARAMS, _MAX_PARAM_CHARS = 1000, 100, 6000
# else FAILED; a preempted run was stopped from outside, as a cancelled one (MLflow has no other word)
_STATUS = {JobState.SUCCEEDED: "FINISHED", JobState.CANCELLED: "KILLED", JobState.PREEMPTED: "KILLED"}

T = TypeVar("T")


class NotFinishedError(UserError, RuntimeError):
    """The job has not ended: its metrics and model are not final yet."""


class AlreadyExportedError(UserError, RuntimeError):
    """The experiment already holds an export of this job (``again=True`` adds another)."""


class MlflowExportError(LanenbError, RuntimeError):
    """MLflow refused the export (unreachable server, bad URI, permissions): the cause is kept."""


class MlflowExport:
    """What ``to_mlflow`` did: the MLflow ``run_id``, ``experiment_id``, ``tracking_uri``, and
    ``notes`` (what was left out and why, e.g. a run dir not on this machine)."""

    def __init__(self, run_id: str, experiment_id: str, tracking_uri: str, record: RunRecord) -> None:
        self.run_id = run_id
        self.experiment_id = experiment_id
        self.tracking_uri = tracking_uri
        self.record = record
        self.notes = list(record.notes)

    def __str__(self) -> str:
        rec = self.record
        head = f"; {rec.headline.text()}" if rec.headline is not None else ""
        text = (f"{rec.name} -> MLflow run {self.run_id} (experiment {self.experiment_id}, {self.tracking_uri}): "
                f"{len(rec.params)} params, {len(rec.metrics)} metric points, {len(rec.artifacts)} files{head}")
        return "\n".join([text, *(f"note: {n}" for n in self.notes)])

    def __repr__(self) -> str:
        return f"<MlflowExport {self.record.name} -> {self.run_id}>"


def _chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[i:i + size] for i in range(0, len(items), size)] or [items[:0]]


def _client(tracking_uri: str | None) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise UserError("to_mlflow needs MLflow: pip install 'lanenb[trackers]' (mlflow-skinny; "
                        "sqlalchemy and alembic for a sqlite:// store)") from None
    return MlflowClient(tracking_uri=tracking_uri)


def _experiment_id(client: Any, experiment: str, artifact_location: str | None) -> str:
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        return str(found.experiment_id)
    return str(client.create_experiment(experiment, artifact_location=artifact_location))


def _previous(client: Any, experiment_id: str, name: str) -> str | None:
    quoted = name.replace("'", "\\'")
    runs = client.search_runs([experiment_id], filter_string=f"tags.`lanenb.job` = '{quoted}'", max_results=1)
    return str(runs[0].info.run_id) if runs else None


def to_mlflow(run: Job | str, tracking_uri: str | None = None, experiment: str = DEFAULT_EXPERIMENT, *,
              again: bool = False, artifact_location: str | None = None) -> MlflowExport:
    """Log a finished run to MLflow: params, metric series, the headline and the model file.

    Args:
        run: a ``Job`` or a job name; the job must have ended (succeeded, failed or cancelled:
            a failed run is logged with status FAILED, its metrics up to the failure).
        tracking_uri: where MLflow writes (``http://mlflow:5000``, ``sqlite:///mlflow.db`` ...);
            default MLflow's own (``MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db`` here).
        experiment: the MLflow experiment, created when missing (default ``lanenb``).
        again: log another MLflow run even if this experiment already holds one for the job.
        artifact_location: where a *new* experiment keeps its files (default MLflow's choice).

    Returns:
        An ``MlflowExport``: ``run_id``, ``experiment_id``, and ``notes`` on anything left out
        (for a Kubernetes job whose run dir is not on this machine: the checkpoint).

    Raises:
        JobNotFoundError: no job of that name.
        NotFinishedError: the job is still pending or running.
        AlreadyExportedError: the experiment already has this job (pass ``again=True``).
        UserError: MLflow is not installed.
        MlflowExportError: MLflow failed (unreachable server, bad URI ...); the cause is attached.
    """
    job = job_of(run)
    status = job.status()
    if not status.state.finished:
        raise NotFinishedError(f"job {job.name!r} is {status.state.value}: only a finished run can be exported "
                               f"(job.wait() first, or lanenb jobs wait {job.name})")
    if not isinstance(experiment, str) or not experiment.strip():
        raise UserError(f"experiment={experiment!r}: must be a non-empty name")
    record = run_record(job)
    client = _client(tracking_uri)
    from mlflow.entities import Metric, Param
    from mlflow.exceptions import MlflowException

    try:
        experiment_id = _experiment_id(client, experiment, artifact_location)
        previous = _previous(client, experiment_id, job.name)
        if previous is not None and not again:
            raise AlreadyExportedError(f"job {job.name!r} is already in MLflow experiment {experiment!r} as run "
                                       f"{previous}; pass again=True (--again) to log it once more")
        ml_run = client.create_run(experiment_id, start_time=record.start_ms, run_name=job.name,
                                   tags=record.tags)
        run_id = str(ml_run.info.run_id)
        params = [Param(k, v if len(v) <= _MAX_PARAM_CHARS else v[:_MAX_PARAM_CHARS - 1] + "…")
                  for k, v in record.params.items()]
        for chunk in _chunks(params, _MAX_PARAMS):
            client.log_batch(run_id, params=list(chunk))
        metrics = [Metric(m.key, m.value, m.timestamp, m.step) for m in record.metrics]
        for points in _chunks(metrics, _MAX_METRICS):
            client.log_batch(run_id, metrics=list(points))
        if record.notes:
            client.set_tag(run_id, "lanenb.notes", "\n".join(record.notes)[:5000])
        with tempfile.TemporaryDirectory(prefix="lanenb-mlflow-") as clean:
            for path, folder in record.artifacts:
                client.log_artifact(run_id, str(_redacted_copy(path, Path(clean))), folder or None)
        client.set_terminated(run_id, _STATUS.get(status.state, "FAILED"), end_time=record.end_ms)
    except MlflowException as exc:
        raise MlflowExportError(f"MLflow refused the export of {job.name!r} to {client.tracking_uri}: {exc}") from exc
    return MlflowExport(run_id, experiment_id, str(client.tracking_uri), record)


def _redacted_copy(path: Path, folder: Path) -> Path:
    """A JSON file (``config.json``, ``metrics.json``) as uploaded: a copy with every credential
    redacted (the tracking server is read by more people than the run dir); other files as they are."""
    if path.suffix != ".json":
        return path
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return path
    copy = folder / path.name
    copy.write_text(json.dumps(redact_output(data), indent=2, sort_keys=True))
    return copy
