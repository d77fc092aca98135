"""An AzureML job's status in lanenb's words (``JobStatus``), from the SDK's ``Job`` entity.

AzureML's states (the REST API's ``JobStatus`` enum) map onto lanenb's: everything before the
ranks start is pending (``Provisioning`` and ``Queued`` are the ones a person waits on: nodes
being allocated, the cluster's quota), ``Running``/``Finalizing`` running, then one final state.
``CancelRequested`` stays running until AzureML says ``Canceled``, as ``Job.cancel`` expects.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from lanenb.contract.status import JobState, JobStatus

__all__ = ["STATES", "REASONS", "azureml_status", "missing_status"]

STATES = {
    "NotStarted": JobState.PENDING, "Starting": JobState.PENDING, "Provisioning": JobState.PENDING,
    "Preparing": JobState.PENDING, "Queued": JobState.PENDING,
    "Running": JobState.RUNNING, "Finalizing": JobState.RUNNING, "CancelRequested": JobState.RUNNING,
    "Completed": JobState.SUCCEEDED, "Failed": JobState.FAILED, "Canceled": JobState.CANCELLED,
    "NotResponding": JobState.UNKNOWN, "Paused": JobState.SUSPENDED, "Unknown": JobState.UNKNOWN,
}
REASONS = {
    "NotStarted": "submitted; AzureML has not started it yet",
    "Starting": "AzureML is starting the job",
    "Provisioning": "the compute cluster is allocating nodes",
    "Preparing": "building or pulling the environment image on the nodes",
    "Queued": "waiting for nodes of the compute cluster (its size or the subscription's quota)",
    "Finalizing": "the ranks have ended; AzureML is uploading outputs and logs",
    "CancelRequested": "cancel requested; AzureML is stopping the ranks",
    "NotResponding": "AzureML lost contact with the job",
    "Paused": "paused in AzureML",
}


def _timestamp(value: Any) -> float | None:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def azureml_status(job: Any) -> JobStatus:
    """``JobStatus`` of an SDK ``Job`` (``ml_client.jobs.get``): state, a reason a person can act
    on, the raw AzureML status as ``message``, the start/end times AzureML recorded."""
    value = getattr(job, "status", None) or "Unknown"
    raw = str(getattr(value, "value", value))  # the SDK hands back its JobStatus enum, or a string
    state = STATES.get(raw, JobState.UNKNOWN)
    reason = REASONS.get(raw)
    properties = getattr(job, "properties", None) or {}
    times = getattr(job, "creation_context", None)
    started = _timestamp(properties.get("StartTimeUtc")) if isinstance(properties, dict) else None
    finished = _timestamp(properties.get("EndTimeUtc")) if isinstance(properties, dict) else None
    if state.finished and finished is None and times is not None:
        finished = _timestamp(getattr(times, "last_modified_at", None))
    if state is JobState.FAILED:
        error = properties.get("azureml.runError") if isinstance(properties, dict) else None
        reason = f"AzureML reports Failed: {error}" if error else "AzureML reports Failed (see the ranks' logs)"
    elif state is JobState.UNKNOWN and raw not in STATES:
        reason = f"AzureML status {raw!r}"
    return JobStatus(state, reason=reason, message=raw, started=started, finished=finished)


def missing_status(name: str, workspace: str) -> JobStatus:
    """The job is not in the workspace (deleted, or another workspace): its outcome was never seen."""
    return JobStatus(JobState.LOST, reason=f"job {name!r} no longer exists in AzureML workspace {workspace}")
