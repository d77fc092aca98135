"""The lanenb jobs of an AzureML workspace, as rows of the team view.

A team that trains on AzureML shares a workspace, not a namespace: its jobs list (one paged
``GET .../jobs``) holds everyone's runs. lanenb tags the jobs it submits (``lanenb.job``), so
the team view keeps those: who created each (AzureML's ``createdBy``), its state in lanenb's
words with AzureML's reason for a pending one ("waiting for nodes of the compute cluster"),
ranks and the GPUs of the cluster's VM size. AzureML's own access control decides what we may
read: a workspace that refuses the list (403) is named under the table, as a namespace is.

The rows are read-only: cancel a job of one's own with ``Job.cancel`` (it is in the registry);
whether Azure RBAC would let us cancel a teammate's job cannot be asked without trying.

Asked by a sidebar every few seconds, the list is kept for ``AZUREML_TTL_S`` (one request per
page per TTL, however often the view is drawn).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lanenb.backends.azureml.options import AzureMLOptions
from lanenb.backends.azureml.status import REASONS, azureml_status
from lanenb.backends.azureml.workspace import AzureMLError, WorkspaceRef, ml_client, resolve_workspace
from lanenb.contract.status import JobState
from lanenb.errors import SpecError
from lanenb.team.reasons import Waiting
from lanenb.team.rows import TeamJob
from lanenb.team.view import Unreadable

__all__ = ["WorkspaceJobs", "configured_workspace", "AZUREML_TTL_S", "TAG", "MAX_JOBS"]

TAG = "lanenb.job"  # set on every job lanenb submits (backends/azureml/command_job.py)
AZUREML_TTL_S = 30.0
MAX_JOBS = 2000  # the newest jobs of a workspace read at most (AzureML pages them 100 at a time)
_QUEUED = {"NotStarted", "Starting", "Provisioning", "Preparing", "Queued"}


def configured_workspace() -> WorkspaceRef | None:
    """The workspace the environment or a ``config.json`` names (as ``--backend azureml``
    would find it), or None when none is configured: the team view then has no AzureML part."""
    try:
        return resolve_workspace(AzureMLOptions())
    except SpecError:
        return None


def _where(ref: WorkspaceRef) -> str:
    """The team view's namespace column for a workspace's jobs."""
    return f"azureml:{ref.workspace}"


def _compute_name(job: Any) -> str | None:
    compute = str(getattr(job, "compute", "") or "")
    return compute.rsplit("/", 1)[-1] or None


def _ranks(job: Any) -> tuple[int, int]:
    """(instances, ranks) of an MPI command job."""
    resources = getattr(job, "resources", None)
    instances = int(getattr(resources, "instance_count", None) or 1)
    per = int(getattr(getattr(job, "distribution", None), "process_count_per_instance", None) or 1)
    return instances, instances * per


def _row(job: Any, ref: WorkspaceRef, gpus_per_node: int, mine: bool) -> TeamJob:
    status = azureml_status(job)
    raw = str(getattr(job.status, "value", job.status) or "Unknown")
    context = getattr(job, "creation_context", None)
    created: Any = getattr(context, "created_at", None)
    instances, ranks = _ranks(job)
    waiting = Waiting("azureml", REASONS[raw]) if raw in _QUEUED and raw in REASONS else None
    state = status.state.value
    return TeamJob(namespace=_where(ref), name=str(job.name), uid=str(getattr(job, "id", None) or job.name),
                   user=getattr(context, "created_by", None) or None, mine=mine,
                   created=created.timestamp() if isinstance(created, dt.datetime) else None,
                   started=status.started, finished=status.finished, state=state,
                   reason=status.reason if status.state in (JobState.FAILED, JobState.UNKNOWN) else None,
                   waiting=waiting, workers=instances, gpus_per_worker=gpus_per_node, ranks=ranks,
                   gpus_held=instances * gpus_per_node if status.state is JobState.RUNNING else 0,
                   nodes=[_compute_name(job) or "?"])


@dataclass
class WorkspaceJobs:
    """A workspace's lanenb jobs, read at most every ``ttl_s``. ``client_kwargs``: for
    ``MLClient`` (``credential=``, ``transport=`` in tests)."""

    ref: WorkspaceRef
    ttl_s: float = AZUREML_TTL_S
    client_kwargs: dict[str, Any] = field(default_factory=dict)
    _read_at: float = field(default=-1.0, init=False)
    _rows: list[TeamJob] = field(default_factory=list, init=False)
    _unreadable: list[Unreadable] = field(default_factory=list, init=False)
    _gpus: dict[str, int] = field(default_factory=dict, init=False)  # compute name -> GPUs per node
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _client: Any = field(default=None, init=False)

    def _ml(self) -> Any:
        if self._client is None:
            kwargs = dict(self.client_kwargs)
            self._client = ml_client(self.ref, kwargs.pop("credential", None), **kwargs)
        return self._client

    def _node_gpus(self, name: str | None) -> int:
        """GPUs per node of compute ``name`` (asked once per cluster; 0 when it cannot be read)."""
        if name is None:
            return 0
        if name not in self._gpus:
            from azure.core.exceptions import AzureError

            from lanenb.backends.azureml.compute import compute_shape

            try:
                self._gpus[name] = compute_shape(self._ml(), name).gpus
            except (AzureError, AzureMLError):
                self._gpus[name] = 0  # a deleted or unreadable cluster: its jobs still list
        return self._gpus[name]

    def read(self, mine: Callable[[], Iterable[str]] = tuple, now: float | None = None
             ) -> tuple[list[TeamJob], list[Unreadable]]:
        """The rows and what could not be read; from memory within ``ttl_s`` of the last read.
        ``mine``: the names of the jobs in this user's registry (marked "(you)"), asked only
        when the workspace is listed again, not on every draw."""
        now = time.time() if now is None else now
        with self._lock:
            if self._read_at < 0 or now - self._read_at >= self.ttl_s:
                self._rows, self._unreadable = self._list(set(mine()))
                self._read_at = now
            return list(self._rows), list(self._unreadable)

    def _list(self, mine: set[str]) -> tuple[list[TeamJob], list[Unreadable]]:
        from azure.core.exceptions import AzureError, HttpResponseError

        rows: list[TeamJob] = []
        try:
            for i, job in enumerate(self._ml().jobs.list()):
                if i >= MAX_JOBS:
                    break
                if TAG not in (getattr(job, "tags", None) or {}):
                    continue
                rows.append(_row(job, self.ref, self._node_gpus(_compute_name(job)), str(job.name) in mine))
        except HttpResponseError as exc:
            code = exc.status_code or 0
            message = getattr(exc.error, "message", None) or exc.reason or str(exc)
            return rows, [Unreadable("AzureML jobs", _where(self.ref), "the workspace's jobs are not listed",
                                     str(message), code=code)]
        except AzureError as exc:
            return rows, [Unreadable("AzureML jobs", _where(self.ref), "the workspace's jobs are not listed",
                                     str(exc), code=0)]
        rows.sort(key=lambda r: r.created or 0.0, reverse=True)  # newest first, as the cluster's rows
        return rows, []
