"""What ``%lanetrain`` and ``lanenb train`` print around a launch, written once so both faces
say the same: the ``--dry-run`` report and the final line of a ``--wait``."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from lanenb.analysis.headline import from_metrics
from lanenb.commands.arguments import in_flag_words
from lanenb.contract.spec import TrainSpec
from lanenb.jobs import Job, get_backend, validate

__all__ = ["dry_run_text", "metrics_text"]


def dry_run_text(spec: TrainSpec, ns: argparse.Namespace | None = None) -> tuple[str, int]:
    """The validated spec, every problem, and what would run; nothing starts. ``ns``: the parsed
    flags, so a problem names the flag the user typed (``--processes 999: ...``).

    Returns:
        ``(text, problems)``: the report (the MPIJob YAML for a backend that renders one, the
        ``mpirun`` argv for one that launches here when the spec has no problem) and how many
        problems it lists (``lanenb train --dry-run`` exits 1 when there are any).
    """
    problems = validate(spec)
    summary = (f"spec: {spec.processes} process(es) x {spec.gpus} GPU(s), batch {spec.batch_size} per rank = "
               f"global batch {spec.global_batch}, {spec.epochs} epoch(s), engine {spec.engine}, "
               f"backbone {spec.backbone}, backend {spec.backend}")
    lines = [summary]
    lines += [f"problem: {in_flag_words(p.field, p.value, str(p), ns)}" for p in problems]
    backend: Any = get_backend(spec.backend)
    if hasattr(backend, "render"):
        lines.append(backend.render(spec))
    elif hasattr(backend, "launcher_argv") and not problems:
        lines.append("mpirun argv: " + shlex.join(backend.launcher_argv(spec, spec.run_dir or "<run dir>")))
    return "\n".join(lines), len(problems)


def metrics_text(job: Job) -> str:
    """The finished job's headline test figure, labelled with its model (the same figure as the
    status line and ``%lanejobs``), and the other model's beside it: ``""`` before a test result."""
    found = from_metrics(job.metrics)
    return "" if found is None else "; " + found.long()
