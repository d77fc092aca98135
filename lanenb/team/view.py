"""The team view: every readable lanenb MPIJob, GPU capacity, quotas and what could not be read.

``TeamView`` is plain data; ``to_dict`` is what the sidebar reads, ``table`` what ``%lanejobs
--team`` and ``lanenb jobs list --team`` print (one ``lanenb.tables.Table``: HTML in JupyterLab,
aligned text elsewhere), so both faces show the same words.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from typing import Any

from lanenb.charts.formats import MISSING, format_duration, format_percent
from lanenb.tables import Table
from lanenb.team.capacity import NodeGpus, QuotaUse
from lanenb.team.rows import TeamJob

__all__ = ["TeamView", "Unreadable", "COLUMNS"]

COLUMNS = ("name", "user", "namespace", "size", "status", "run time", "progress", "accuracy", "GPU util")


@dataclass(frozen=True)
class Unreadable:
    """Something RBAC kept from us: ``what`` ("pods", "nodes", "pod logs", "AzureML jobs"),
    ``namespace`` (None: cluster-wide; ``azureml:WORKSPACE``), ``means`` (what the view lacks for
    it), ``message`` (the server's words)."""

    what: str
    namespace: str | None
    means: str
    message: str
    code: int = 403  # the HTTP status; 0: not reachable at all

    def text(self) -> str:
        where = f" in {self.namespace}" if self.namespace else " across the cluster"
        why = str(self.code) if self.code else "not reachable"
        return f"cannot read {self.what}{where} ({why}): {self.means}"

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "namespace": self.namespace, "means": self.means, "message": self.message,
                "text": self.text()}


@dataclass
class TeamView:
    """What ``TeamCollector.view`` returns."""

    user: str
    scope: str  # "cluster" (every namespace) or "namespaces" (the ones listed in ``namespaces``)
    namespaces: list[str]
    jobs: list[TeamJob]
    nodes: list[NodeGpus]
    quotas: list[QuotaUse]
    unreadable: list[Unreadable] = field(default_factory=list)
    partial_nodes: bool = False  # allocated GPUs count only the pods we may read
    workspaces: list[str] = field(default_factory=list)  # AzureML workspaces whose jobs are rows too
    now: float = field(default_factory=time.time)

    @property
    def gpus_total(self) -> int:
        return sum(n.allocatable for n in self.nodes)

    @property
    def gpus_allocated(self) -> int:
        return sum(n.allocated for n in self.nodes)

    def capacity_line(self) -> str:
        if not self.nodes:
            return "GPUs: no node with nvidia.com/gpu is readable"
        by_node = ", ".join(f"{n.node} {n.allocated}/{n.allocatable}" for n in self.nodes)
        free = sum(n.free for n in self.nodes)
        line = f"GPUs: {self.gpus_allocated} of {self.gpus_total} allocated, {free} free ({by_node})"
        return line + (" - at least: pods of namespaces we cannot read are not counted" if self.partial_nodes else "")

    def quota_lines(self) -> list[str]:
        return [f"quota {q.namespace}/{q.quota}: {q.used} of {q.hard} {q.resource} used, {q.free} free"
                for q in self.quotas]

    def notes(self) -> list[str]:
        """The lines under the table: capacity, quotas, start estimates, what could not be read."""
        lines = [self.capacity_line(), *self.quota_lines()]
        lines += [f"{j.namespace}/{j.name}: {j.start_estimate}" for j in self.jobs if j.start_estimate]
        lines += [u.text() for u in self.unreadable]
        return lines

    def row(self, job: TeamJob) -> list[str]:
        run = job.run_s(self.now)
        progress = "-" if job.progress is None else f"{job.progress:.0%}" + (
            f" (ETA {format_duration(job.eta_s)})" if job.eta_s is not None else "")
        return [job.name, (job.user or "?") + (" (you)" if job.mine else ""), job.namespace, job.size,
                job.status_text(), format_duration(run), progress, job.headline or MISSING,
                format_percent(None if job.gpu_util is None else job.gpu_util / 100)]

    def table(self) -> Table:
        where = "all namespaces" if self.scope == "cluster" else ", ".join(self.namespaces) or "no namespace"
        where = ", ".join([where, *(f"AzureML workspace {w}" for w in self.workspaces)])
        return Table(list(COLUMNS), [self.row(j) for j in self.jobs], title=f"lanenb jobs of the team ({where})",
                     note="\n".join(self.notes()), empty="no lanenb jobs in " + where)

    def text(self) -> str:
        table = self.table()
        return table.text() if self.jobs else table.empty + "\n" + table.note

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        table = self.table()
        bundle = table.mimebundle()
        if not self.jobs:  # a table without rows shows its empty line only: the notes still matter
            bundle["text/plain"] = self.text()
            bundle["text/html"] += "<br><small>" + html.escape(table.note).replace("\n", "<br>") + "</small>"
        return bundle

    def __repr__(self) -> str:
        return self.text()

    def to_dict(self) -> dict[str, Any]:
        return {
            "user": self.user, "scope": self.scope, "namespaces": self.namespaces, "now": self.now,
            "jobs": [j.to_dict(self.now) for j in self.jobs],
            "nodes": [n.to_dict() for n in self.nodes], "partial_nodes": self.partial_nodes,
            "gpus": {"total": self.gpus_total, "allocated": self.gpus_allocated,
                     "free": sum(n.free for n in self.nodes)},
            "quotas": [q.to_dict() for q in self.quotas],
            "unreadable": [u.to_dict() for u in self.unreadable],
            "capacity": self.capacity_line(),
        }
