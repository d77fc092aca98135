"""The JSON the JupyterLab extension reads from the REST API, written down once.

One ``TypedDict`` per payload (a nested one is named by its own type), each saying which code
produces it. ``extension/src/api.ts`` declares the same shapes as TypeScript interfaces, one per
class here (``I`` + the class name); ``tests/server/test_payload_types.py`` reads that file and
fails when the two name different fields, and builds every payload with its real producer to
check that it sends exactly these keys. A field is added here, in ``api.ts`` and in its producer,
or the test says which side lacks it.

The producers below the server (``lanenb.analysis``, ``lanenb.sweeps``, ``lanenb.snapshots``, the
trainer's headline) return plain dicts, since a lower layer never imports ``lanenb.server``;
``lanenb.server.api`` and ``lanenb.server.feeds`` cast them to these types where they hand them
to a handler. ``NotRequired`` marks a key that is sometimes absent (``?`` in TypeScript); a key
that is always sent but may be null is ``X | None``.

``GET lanenb/jobs/NAME/metrics`` (the run's whole chart history, for scripts; no face of the
extension reads it) and ``GET lanenb/jobs/NAME`` (the job's spec) are left untyped on purpose:
they are ``RunState.to_dict()`` and ``Job.describe()`` as they grow.
"""

import sys
from typing import Any, TypedDict

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # typing-extensions comes with torch
    from typing_extensions import NotRequired

__all__ = [
    "Utilisation", "StepSplit", "Verdict", "Figure", "Headline", "JobSummary", "JobStatus", "UpdateLine",
    "Update", "RankRow", "RunCharts", "JobPanelState", "UpdateBatch", "StopReply", "Snapshot", "FileChange",
    "SnapshotDiff", "RestoreReply", "SweepBest", "SweepObjective", "SweepSummary", "TrialRow",
    "SearchDimension", "SweepSettings", "SweepDetail", "SweepStopReply",
]


# ---------------------------------------------------------------------------- jobs
class Utilisation(TypedDict):
    """The newest system samples of the lowest rank (``lanenb.analysis.summary.utilisation``):
    ``metric`` ``gpu_util`` or ``cpu_percent``; no ``rank`` before the first sample."""

    metric: str | None
    rank: NotRequired[int]
    values: list[float]
    last: dict[str, float]


class StepSplit(TypedDict):
    """One rank's step split (``RunState.breakdown()``): shares 0..1 of a step, ``step_s``
    seconds per step."""

    data: float
    compute: float
    exchange: float
    other: float
    step_s: float


class Verdict(TypedDict):
    """The doctor's verdict (``lanenb.analysis.doctor.Verdict.to_dict``): ``line`` starts with
    ``kind``; ``severity`` is ``lanenb.charts.vocabulary``'s colour word."""

    kind: str
    message: str
    action: str
    rank: int | None
    host: str | None
    value: float | None
    change: dict[str, Any] | None  # {"setting": "num_workers", "value": 6}: what "Apply" resumes with
    line: str
    severity: str


class Figure(TypedDict):
    """One scored model (``lanenb_trainer.evaluation.headline.Figure.to_dict``)."""

    model: str
    epoch: int | None
    label: str
    split: str
    accuracy: float | None
    fp: float | None
    fn: float | None
    frames: int | None
    official_accuracy: float | None  # the official 200 ms rule's score (the headline scores the lanes)
    over_time_frames: int | None  # frames that rule zeroed
    latency_ms_p50: float | None
    realtime: str  # "12/40 frames over the 200 ms real-time limit ...; official score 0.71", or ""


class Headline(Figure):
    """The run's headline figure (``Headline.to_dict``): the primary figure's fields, ``text``
    (a status line's words), ``cell`` (a table's) and ``other`` (the other test model)."""

    text: str
    cell: str
    other: Figure | None


class JobSummary(TypedDict):
    """One row of the jobs list (``lanenb.analysis.summary.job_summary``; ``error_summary`` for a
    job whose state could not be read: ``error`` set, state ``unknown``, the rest null)."""

    name: str
    backend: str
    created: float | None
    age_s: float | None
    run_dir: str | None
    state: str
    reason: str | None
    status: str
    progress: float | None
    step: int | None
    total_steps: int | None
    eta_s: float | None
    accuracy: float | None
    accuracy_split: str | None
    accuracy_label: str | None
    headline: Headline | None
    loss: float | None
    summary: str | None
    utilisation: Utilisation
    final: bool
    error: str | None
    verdict: Verdict | None
    breakdown: dict[str, StepSplit]


class JobStatus(TypedDict):
    """Where a job stands (``lanenb.contract.status.JobStatus.to_dict``)."""

    state: str
    reason: str | None
    message: str | None
    started: float | None
    finished: float | None
    ranks: dict[str, Any]
    exit_code: int | None


class UpdateLine(TypedDict):
    """One log line of an update (``lanenb.server.feeds.update_dict``): ``rank`` None for the
    launcher's own lines; ``error`` is ``LogLine.error``, the one highlight rule."""

    rank: int | None
    text: str
    source: str
    error: bool


class Update(TypedDict):
    """One update of a job's stream (``lanenb.server.feeds.update_dict``): a status change, a log
    line, or both. ``event`` is the line's ``@lanenb`` event (docs/EVENTS.md), ``display`` the
    line in words (None for charted samples)."""

    cursor: str
    status: NotRequired[JobStatus]
    line: NotRequired[UpdateLine]
    event: NotRequired[dict[str, Any]]
    display: NotRequired[str | None]


class RankRow(TypedDict):
    """One row of the per-rank table (``lanenb.analysis.chartdata.rank_table``)."""

    rank: int
    host: str | None
    gpu_util: float | None
    gpu_mem_mb: float | None
    gpu_mem_total_mb: float | None
    cpu_percent: float | None
    rss_mb: float | None
    step_s: float | None
    data: float | None
    compute: float | None
    exchange: float | None
    other: float | None


class RunCharts(TypedDict):
    """The run's Vega-Lite panels and their rows (``lanenb.analysis.chartdata.run_specs`` and
    ``run_rows``): the notebook view's charts."""

    specs: list[dict[str, Any]]
    rows: dict[str, list[dict[str, Any]]]


class JobPanelState(TypedDict):
    """What the job panel draws (``lanenb.server.feeds.JobFeed.panel_state``), sent as ``state``
    in ``updates?state=1``: the status line, the headline, the verdict, the rank table and the
    charts. The whole reduced state (series, epochs, system samples) is ``metrics``'."""

    state: str
    step: int
    total_steps: int | None
    epoch: int  # the 0-based index the events carry; the panel says it from 1 (epochText)
    epochs_total: int | None  # the run's --epochs (``epochs`` is the per-epoch history in metrics)
    progress: float | None
    eta_s: float | None
    world_size: int | None
    headline: Headline | None
    verdict: Verdict | None
    ranks: list[RankRow]
    charts: RunCharts


class UpdateBatch(TypedDict):
    """``GET lanenb/jobs/NAME/updates`` (``lanenb.server.feeds.JobFeed.updates``); ``state`` only
    when asked (``state=1``, added by the handler)."""

    updates: list[Update]
    cursor: str | None
    final: bool
    status: JobStatus | None
    state: NotRequired[JobPanelState]


class StopReply(TypedDict):
    """``POST lanenb/jobs/NAME/stop`` (``lanenb.server.api.stop_job``)."""

    name: str
    status: JobStatus


# ---------------------------------------------------------------------------- snapshots
class Snapshot(TypedDict):
    """One row of ``GET lanenb/snapshots`` (``lanenb.snapshots.base.Snapshot.to_dict`` plus the
    ``job`` that made it, from ``lanenb.server.api.list_snapshots``)."""

    id: str
    name: str
    volume: str
    created: float
    size: int | None
    labels: dict[str, str]
    ready: bool
    backend: str
    file_count: int | None
    error: str | None
    job: str | None


class FileChange(TypedDict):
    """One path that differs between two snapshots (``lanenb.snapshots.base.FileChange``)."""

    path: str
    change: str
    size_before: int | None
    size_after: int | None


class SnapshotDiff(TypedDict):
    """``GET lanenb/snapshots/diff?a=&b=`` (``lanenb.server.api.diff_snapshots``)."""

    a: str
    b: str
    summary: str
    changes: list[FileChange]


class RestoreReply(TypedDict):
    """``POST lanenb/snapshots/ID/restore`` (``lanenb.server.api.restore_snapshot``)."""

    id: str
    volume: str


# ---------------------------------------------------------------------------- sweeps
class SweepBest(TypedDict):
    """A sweep's best finished trial (``lanenb.sweeps.Sweep.best``)."""

    number: int
    job: str | None
    params: dict[str, Any]
    value: float
    objective: str


class SweepObjective(TypedDict):
    """What a sweep optimises, as a list row shows it (``Sweep.summary``'s ``objective``)."""

    label: str
    direction: str


class SweepSummary(TypedDict):
    """One row of ``GET lanenb/sweeps`` (``lanenb.sweeps.Sweep.summary``; a study that could not
    be read: ``lanenb.server.api.list_sweep_summaries``' row with ``error``, the rest null)."""

    name: str
    state: str
    trials_total: int | None
    trials_done: int | None
    trials_running: int | None
    best: SweepBest | None
    objective: SweepObjective | None
    sampler: str | None
    pruner: str | None
    error: NotRequired[str]


class TrialRow(TypedDict):
    """One trial of the trials table (``lanenb.sweeps.sweep.TrialRow.to_dict``)."""

    number: int
    state: str
    params: dict[str, Any]
    value: float | None
    epochs: int
    job: str | None
    why: str | None


class SearchDimension(TypedDict):
    """One searched flag (``lanenb.sweeps.space.Dimension.to_dict``)."""

    name: str
    kind: str
    low: float | None
    high: float | None
    log: bool
    choices: list[Any]


class SweepSettings(TypedDict):
    """A sweep's settings (``lanenb.sweeps.driver.SweepSettings.to_dict``, the base job
    redacted by ``Sweep.detail``)."""

    space: list[SearchDimension]
    trials: int
    parallel: int
    sampler: str
    pruner: str
    min_epochs: int
    seed: int | None
    objective: dict[str, str]
    base: dict[str, Any]


class SweepDetail(SweepSummary):
    """``GET lanenb/sweeps/NAME`` (``lanenb.server.api.sweep_detail``: ``Sweep.detail`` and the
    ``%lanesweep`` chart, one Vega-Lite spec per part)."""

    params: list[str]
    trials: list[TrialRow]
    settings: SweepSettings
    charts: list[dict[str, Any]]


class SweepStopReply(TypedDict):
    """``POST lanenb/sweeps/NAME/stop`` (``lanenb.server.api.stop_sweep``)."""

    name: str
    state: str
