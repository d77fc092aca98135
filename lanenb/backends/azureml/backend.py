"""The ``azureml`` backend: a ``TrainSpec`` becomes an AzureML command job with an MPI
distribution, on a compute cluster, through the official SDK (``azure-ai-ml``).

Layout: ``workspace`` finds the workspace and makes the ``MLClient`` (``DefaultAzureCredential``),
``command_job`` builds the job (and its YAML for ``--dry-run``), ``status`` puts AzureML's states
in lanenb's words, ``rank_logs`` turns the ranks' log files into ``LogLine`` objects; this module
talks to the service. Every request goes through the SDK's azure-core pipelines, so the tests
replay recorded HTTP exchanges under the SDK's real code (``tests/azureml``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lanenb.backends.azureml.command_job import (
    build_command,
    check_job,
    default_run_dir,
    refuse_literal_secrets,
    render,
)
from lanenb.backends.azureml.compute import compute_shape
from lanenb.backends.azureml.rank_logs import decode_cursor, encode_cursor, new_lines, rank_files
from lanenb.backends.azureml.status import STATES, azureml_status, missing_status
from lanenb.backends.azureml.workspace import AzureMLError, WorkspaceRef, ml_client, resolve_workspace
from lanenb.contract.backend import Backend, LogChunk, LogLine
from lanenb.errors import SpecError

if TYPE_CHECKING:
    from azure.ai.ml import MLClient

    from lanenb.contract.spec import TrainSpec
    from lanenb.contract.status import JobStatus

__all__ = ["AzureMLBackend", "AzureMLError"]

_FINAL = {raw for raw, state in STATES.items() if state.finished}


def _explain(exc: BaseException, what: str) -> AzureMLError:
    """One translation of the SDK's azure-core errors: what was asked, the HTTP status and
    AzureML's own message (never the request's headers, which carry the token)."""
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

    if isinstance(exc, ClientAuthenticationError):
        return AzureMLError(f"{what}: not signed in to Azure ({exc.message}); run 'az login' or set "
                            "AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET (DefaultAzureCredential)")
    if isinstance(exc, HttpResponseError):
        code = getattr(exc.error, "code", None) if exc.error is not None else None
        status = exc.status_code if exc.status_code is not None else "?"
        return AzureMLError(f"{what}: AzureML answered {status}{f' {code}' if code else ''}: "
                            f"{getattr(exc.error, 'message', None) or exc.reason or exc}")
    return AzureMLError(f"{what}: {exc}")


class AzureMLBackend(Backend):
    """Submit, follow and cancel AzureML command jobs. Keeps clients, never per-job state.

    Args:
        credential: an azure-core ``TokenCredential`` (default: ``DefaultAzureCredential``).
        poll_interval: seconds between log reads while following a job.
        **client_kwargs: passed to every SDK pipeline (``transport=`` for tests, retry options).
    """

    name = "azureml"

    def __init__(self, *, credential: Any = None, poll_interval: float = 2.0, **client_kwargs: Any) -> None:
        self._credential = credential
        self._client_kwargs = client_kwargs
        self._clients: dict[WorkspaceRef, MLClient] = {}
        self.poll_interval = poll_interval

    # ------------------------------------------------------------------ plumbing
    def workspace(self, spec: TrainSpec, handle: dict[str, Any] | None = None) -> WorkspaceRef:
        """The job's workspace: the one recorded at submit (so another kernel, or a changed
        environment, still reaches the same job), else the spec's (see ``resolve_workspace``)."""
        if handle and handle.get("workspace"):
            return WorkspaceRef(handle["subscription_id"], handle["resource_group"], handle["workspace"], "handle")
        return resolve_workspace(spec.azureml)

    def client(self, ref: WorkspaceRef) -> MLClient:
        key = WorkspaceRef(ref.subscription_id, ref.resource_group, ref.workspace)
        if key not in self._clients:
            self._clients[key] = ml_client(key, self._credential, **self._client_kwargs)
        return self._clients[key]

    def _job_name(self, spec: TrainSpec, handle: dict[str, Any] | None) -> str:
        return str((handle or {}).get("name") or spec.name)

    # ------------------------------------------------------------------ Backend API
    def render(self, spec: TrainSpec) -> str:
        """The job YAML (``--dry-run``); a spec the builder refuses gets its reason instead, since
        the dry-run report has listed it as a problem already."""
        try:
            return render(spec)
        except SpecError as exc:
            return f"no job YAML: {exc}"

    def validate(self, spec: TrainSpec, run_dir: str | Path | None = None) -> None:
        """Everything that can be checked without Azure: compute, nodes, the dataset's kind (a
        local one must be a folder), the run dir, and that a workspace is named somewhere."""
        check_job(spec, str(run_dir) if run_dir else None)
        refuse_literal_secrets(spec)
        resolve_workspace(spec.azureml)

    def submit(self, spec: TrainSpec, run_dir: str | Path | None = None) -> dict[str, Any]:
        """Create the job (a local dataset folder or a Dockerfile build context is uploaded by
        the SDK first) and return once AzureML has accepted it. The handle keeps the workspace,
        so ``get_job`` in another kernel follows the same job."""
        from azure.core.exceptions import AzureError

        target = str(run_dir) if run_dir else default_run_dir(spec)
        refuse_literal_secrets(spec)
        job = build_command(spec, target)  # every check before any request
        ref = resolve_workspace(spec.azureml)
        client = self.client(ref)
        try:
            created = client.jobs.create_or_update(job)
        except AzureError as exc:
            raise _explain(exc, f"creating AzureML job {spec.name} in workspace {ref}") from exc
        return {**ref.to_dict(), "name": created.name or spec.name, "run_dir": target,
                "studio_url": getattr(created, "studio_url", None), "compute": spec.azureml.compute,
                "submitted": time.time()}

    def _get(self, spec: TrainSpec, handle: dict[str, Any]) -> Any:
        """The SDK's ``Job``, or None when the workspace has no such job."""
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        ref, name = self.workspace(spec, handle), self._job_name(spec, handle)
        try:
            return self.client(ref).jobs.get(name)
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise _explain(exc, f"reading AzureML job {name}") from exc

    def status(self, spec: TrainSpec, handle: dict[str, Any]) -> JobStatus:
        job = self._get(spec, handle)
        if job is None:
            return missing_status(self._job_name(spec, handle), self.workspace(spec, handle).workspace)
        return azureml_status(job)

    def cancel(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        """Ask AzureML to cancel (it stops the ranks and reports ``Canceled``); returns without
        waiting for that. A job already gone or already finished is fine."""
        from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

        ref, name = self.workspace(spec, handle), self._job_name(spec, handle)
        try:
            self.client(ref).jobs.begin_cancel(name, polling=False)
        except ResourceNotFoundError:
            return
        except HttpResponseError as exc:
            current = self._get(spec, handle)
            if current is None or azureml_status(current).state.finished:
                return  # AzureML refuses to cancel what has ended: nothing left to stop
            raise _explain(exc, f"cancelling AzureML job {name}") from exc

    # ------------------------------------------------------------------ logs
    def _run_details(self, spec: TrainSpec, handle: dict[str, Any]) -> Any:
        """The run history's details of the job (status, log files with read URLs): what the
        SDK's ``jobs.stream`` reads. ``_runs_operations`` is not public SDK API; it is reached
        here only, so an SDK change is fixed in one place."""
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        name = self._job_name(spec, handle)
        try:
            return self.client(self.workspace(spec, handle)).jobs._runs_operations.get_run_details(name)
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise _explain(exc, f"reading the run history of AzureML job {name}") from exc

    def _download(self, spec: TrainSpec, handle: dict[str, Any], url: str, offset: int) -> bytes:
        """One log file from byte ``offset`` on, through the SDK's own retrying pipeline (as
        ``jobs.stream``): a ``Range`` request; a 200 (the whole file) is cut here; 416 (nothing
        after ``offset``) and 404 (not written yet) are no new bytes."""
        from azure.ai.ml._utils.utils import create_requests_pipeline_with_retry
        from azure.core.exceptions import AzureError

        client = self.client(self.workspace(spec, handle))
        pipeline = create_requests_pipeline_with_retry(requests_pipeline=client.jobs._requests_pipeline)
        what = f"reading a log file of AzureML job {self._job_name(spec, handle)}"
        try:
            response = pipeline.get(url, headers={"Range": f"bytes={offset}-"} if offset else None,
                                    connection_timeout=10, read_timeout=60)
            response.read()
        except AzureError as exc:
            raise _explain(exc, what) from exc
        if response.status_code in (404, 416):
            return b""
        if response.status_code >= 400:
            raise AzureMLError(f"{what}: the storage answered {response.status_code} {response.reason}")
        return bytes(response.content) if response.status_code == 206 else bytes(response.content)[offset:]

    def read_log(self, spec: TrainSpec, handle: dict[str, Any], cursor: str | None, *,
                 max_lines: int = 5000, tail_lines: int | None = None) -> LogChunk:
        """The ranks' lines after ``cursor`` (bytes delivered per rank), rank by rank.

        ``complete`` once AzureML reports a final state and every file has been read to its end;
        whether the job had ended is decided before the files are read, so a line written
        meanwhile is never lost behind a ``complete``."""
        done = decode_cursor(cursor)
        details = self._run_details(spec, handle)
        if details is None:
            return LogChunk([], cursor, True)
        final = str(getattr(details, "status", "")) in _FINAL
        out: list[tuple[LogLine, str]] = []
        more = False
        for rank, url in rank_files(getattr(details, "log_files", None)).items():
            start = done.get(rank, 0)
            lines, _used = new_lines(rank, self._download(spec, handle, url, start), final=final)
            if tail_lines is not None and cursor is None:
                skipped = lines[:max(0, len(lines) - tail_lines)]
                done[rank] = start + sum(size for _line, size in skipped)
                lines = lines[len(skipped):]
            for line, size in lines:
                if len(out) >= max_lines:
                    more = True
                    break
                done[rank] = done.get(rank, 0) + size
                out.append((line, encode_cursor(done)))  # redacted by the job layer (Job.read_log)
        return LogChunk(out, encode_cursor(done) if (out or done) else cursor, final and not more)

    def logs(self, spec: TrainSpec, handle: dict[str, Any], *, follow: bool = False,
             worker: int | None = None) -> Iterator[LogLine]:
        """Every rank's lines (``worker=N``: rank N's); with ``follow``, new lines as AzureML
        uploads them (every ``poll_interval`` s) until the job has ended and all are read."""
        cursor: str | None = None
        batch = 5000
        while True:
            chunk = self.read_log(spec, handle, cursor, max_lines=batch)
            cursor = chunk.cursor
            yield from (line for line, _c in chunk.lines if worker is None or line.rank == worker)
            if chunk.complete or (not follow and len(chunk.lines) < batch):
                return
            if not chunk.lines:
                time.sleep(self.poll_interval)

    # ------------------------------------------------------------------ forms and debugging
    def capacity(self, spec: TrainSpec | None = None) -> dict[str, int]:
        """From the compute cluster: its most nodes x the GPUs of its VM size (one rank per GPU);
        a CPU cluster offers one rank per vCPU. Needs ``spec.azureml.compute``."""
        if spec is None or spec.azureml.compute is None:
            return super().capacity(spec)
        from azure.core.exceptions import AzureError

        ref = resolve_workspace(spec.azureml)
        name = spec.azureml.compute
        try:
            shape = compute_shape(self.client(ref), name)
        except AzureError as exc:
            raise _explain(exc, f"reading compute cluster {name}") from exc
        if shape.gpus == 0:
            return {"processes": shape.nodes * shape.vcpus, "gpus": 0, "gpus_per_process": 0}
        return {"processes": shape.nodes * shape.gpus, "gpus": shape.nodes * shape.gpus, "gpus_per_process": shape.gpus}

    def datasets(self, spec: TrainSpec | None = None) -> list[str]:
        """The workspace's folder data assets, as ``--data`` takes them (``azureml:NAME@latest``);
        file and table assets are left out (the trainer reads a TuSimple-layout folder)."""
        if spec is None:
            return []
        from azure.core.exceptions import AzureError

        ref = resolve_workspace(spec.azureml)
        try:
            assets = list(self.client(ref).data.list())
        except AzureError as exc:
            raise _explain(exc, f"listing the data assets of workspace {ref}") from exc
        return sorted(f"azureml:{a.name}@latest" for a in assets if str(getattr(a, "type", "")) == "uri_folder")

    def describe(self, spec: TrainSpec, handle: dict[str, Any]) -> dict[str, Any]:
        job = self._get(spec, handle)
        ref = self.workspace(spec, handle)
        status = azureml_status(job) if job is not None else missing_status(self._job_name(spec, handle),
                                                                             ref.workspace)
        return {
            "backend": self.name,
            "workspace": ref.to_dict(),
            "name": self._job_name(spec, handle),
            "status": status.to_dict(),
            "azureml_status": getattr(job, "status", None),
            "compute": getattr(job, "compute", None),
            "studio_url": getattr(job, "studio_url", None) or handle.get("studio_url"),
            "run_dir": handle.get("run_dir"),
        }
