"""The MPIJob's pods and its launcher's log as lanenb lines.

The launcher pod's name has a random suffix, so it is found by the operator's labels; its log
is Open MPI's ``--tag-output`` lines, put back together per rank by the same parser as the local
backend's (``lanenb.launch.lines.TaggedOutputParser``), as the same ``LogLine`` objects whose
``@lanenb`` event is parsed once, when first asked for. Reading and following a pod's log is
``lanenb.kube.logs``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from lanenb.backends.kubernetes.manifests import JOB_NAME_LABEL, JOB_ROLE_LABEL
from lanenb.kube.client import Clients
from lanenb.launch.lines import LogLine, TaggedOutputParser, iter_output

__all__ = ["pod_dicts", "find_pod", "to_log_lines", "to_log_lines_with_cursors"]


def pod_dicts(clients: Clients, namespace: str, job: str, role: str | None = None) -> list[dict[str, Any]]:
    selector = f"{JOB_NAME_LABEL}={job}" + (f",{JOB_ROLE_LABEL}={role}" if role else "")
    # Raw JSON, not the client's models: their strict validation rejects fields newer clusters add.
    resp = clients.raw(clients.core.list_namespaced_pod, namespace, label_selector=selector, what="listing pods",
                       _request_timeout=(5, 30))
    return list(json.loads(resp.data).get("items") or [])


def find_pod(clients: Clients, namespace: str, job: str, worker: int | None = None) -> dict[str, Any] | None:
    """The launcher pod (newest, if the Job retried), or worker ``worker``."""
    if worker is None:
        pods = pod_dicts(clients, namespace, job, "launcher")
    else:
        pods = [p for p in pod_dicts(clients, namespace, job, "worker")
                if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/replica-index") == str(worker)
                or p["metadata"]["name"].endswith(f"-worker-{worker}")]
    pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
    return pods[-1] if pods else None


def to_log_lines(lines: Iterator[str] | list[str], source: str) -> Iterator[LogLine]:
    """Whole per-rank lines from the launcher's raw ``--tag-output`` lines: Open MPI splits a long
    line (an event over 4 KiB) into tagged chunks, which are put back together here exactly as
    the local supervisor does (``TaggedOutputParser``)."""
    return iter_output(lines, source)


def to_log_lines_with_cursors(read: list[tuple[str, str]], source: str) -> list[tuple[LogLine, str]]:
    """``to_log_lines`` for (raw line, cursor after it) pairs: each whole line carries the cursor of
    the raw line that completed it (a chunk still open at the end of a read is flushed as is)."""
    parser = TaggedOutputParser(source)
    out: list[tuple[LogLine, str]] = []
    cursor = ""
    for raw, cursor in read:
        out += [(line, cursor) for line in parser.feed(raw)]
    out += [(line, cursor) for line in parser.flush()]
    return out
