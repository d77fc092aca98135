"""Backend-neutral job state, so the CLI, notebook and sidebar never branch on the backend."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class JobState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    RESTARTING = "restarting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"
    SUSPENDED = "suspended"
    LOST = "lost"
    UNKNOWN = "unknown"

    @property
    def finished(self) -> bool:
        """True once nothing more will happen to the job (waiters can stop)."""
        return self in _FINISHED

    def __str__(self) -> str:  # f"{state}" reads "running", not "JobState.RUNNING"
        return self.value


# LOST: the job's backend object is gone (MPIJob deleted, supervisor and ranks vanished with no
# exit record). Final, so waiters return; ``reason`` says what was seen.
# PREEMPTED: a SIGTERM stopped every rank at a step boundary after a checkpoint, and no restart
# was left (``max_restarts``, ``k8s.backoff_limit``): not a failure, the run can go on from there.
_FINISHED = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED, JobState.LOST})


@dataclass
class JobStatus:
    """A snapshot of where a job stands.

    ``reason`` is written for people ("waiting for 2 GPUs: ..."), ``message`` carries the
    raw backend detail. ``started`` / ``finished`` are UNIX timestamps (seconds) so the
    registry can store them as JSON without timezone games. ``ranks`` maps a rank (or pod
    name) to its own state string.
    """

    state: JobState
    reason: str | None = None
    message: str | None = None
    started: float | None = None
    finished: float | None = None
    ranks: dict[Any, Any] = field(default_factory=dict)
    exit_code: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.state, JobState):
            self.state = JobState(str(self.state))

    @property
    def done(self) -> bool:
        return self.state.finished

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        data["ranks"] = {str(k): v for k, v in self.ranks.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobStatus:
        keys = ("state", "reason", "message", "started", "finished", "ranks", "exit_code")
        known = {k: data[k] for k in keys if k in data}
        return cls(**known)

    def __str__(self) -> str:
        text = self.state.value
        if self.reason:
            text += f": {self.reason}"
        return text
