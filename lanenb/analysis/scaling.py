"""Was 3 GPUs worth it? Short runs at several rank counts, read back from their events.

``measure(spec, processes=[1, 2, 4])`` runs the same spec for ``steps`` steps at each rank
count through the Job API (any backend), drops the warm-up steps and reports, per rank count:
images/s, speed-up, scaling efficiency, the share of a step lost to gradient exchange and
contention, and per-rank GPU (or CPU) utilisation; then it projects the time of a full run of
the dataset for the given epochs, which is the RUN:AI guide's "1 GPU 12h45, 3 GPUs 4h30"
table made by the tool. Every figure comes from the runs' ``@lanenb`` events (step times,
throughput and system samples the ranks reported), never from a timer here, so a report can
be rebuilt later from the recorded jobs (``from_jobs``).

Scaling modes: ``weak`` keeps the per-rank batch (the global batch grows with the ranks, as
the guide's runs did); ``strong`` keeps the global batch (per-rank batch = global / ranks).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lanenb.analysis.charted import ChartedReport
from lanenb.analysis.doctor import diagnose
from lanenb.analysis.runstate import RunState, format_duration
from lanenb.charts.vocabulary import verdict_severity
from lanenb.contract.spec import SpecError
from lanenb.home import lanenb_home, make_private_dir
from lanenb.jobs import Job, TrainSpec, get_job, submit, validate
from lanenb.tables import Table
from lanenb_trainer.errors import UserError
from lanenb_trainer.events import Event

__all__ = ["ScalePoint", "ScalingReport", "measure", "point_from_events", "step_split", "from_jobs",
           "ScalingError"]


class ScalingError(UserError, RuntimeError):
    """A scaling run failed or reported no usable steps; the message names the run."""


@dataclass
class ScalePoint:
    """What one run at ``processes`` ranks reported (post-warm-up step events only)."""

    processes: int
    job: str
    images_per_s: float  # median of the step events' global images/s
    step_time_s: float  # median seconds per step
    steps_measured: int
    batch_per_rank: int | None
    train_frames: int | None
    util_kind: str  # "gpu" (gpu_util %) or "cpu" (cpu_percent, 100 = one core)
    utilisation: dict[int, float] = field(default_factory=dict)  # rank -> mean over the run
    # mean shares over ranks of data / compute / exchange / other in a post-warm-up step (from
    # the ranks' timing events); None for runs without timing and reports saved before it
    breakdown: dict[str, float] | None = None
    # the doctor's verdict at the run's end (``Verdict.to_dict()``: kind, line "exchange-bound: 38% ...",
    # severity); None without timing or before a verdict
    verdict: dict[str, Any] | None = None


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def point_from_events(processes: int, job: str, events: Iterable[Event], warmup: int = 5) -> ScalePoint:
    """A ``ScalePoint`` from a run's events: step events after ``warmup`` steps, system samples.

    Raises:
        ScalingError: the run reported no step after the warm-up.
    """
    ips: list[float] = []
    step_times: list[float] = []
    util: dict[int, list[float]] = {}
    gpu_util: dict[int, list[float]] = {}
    batch = frames = None
    timing: list[Event] = []
    state = RunState(max_points=64, max_log_lines=1)  # the doctor's verdict at the run's end
    for ev in events:
        state.fold(ev)
        if ev.kind == "timing":
            timing.append(ev)
        if ev.kind == "start" and ev.rank == 0:
            batch = (ev.get("config") or {}).get("batch_size")
            frames = ev.get("train_frames")
        elif ev.kind == "step" and isinstance(ev.get("step"), int) and ev.get("step") > warmup:
            if ev.get("images_per_s") is not None:
                ips.append(float(ev.get("images_per_s")))
            if ev.get("step_time_s") is not None:
                step_times.append(float(ev.get("step_time_s")))
        elif ev.kind == "system":
            if ev.get("gpu_util") is not None:
                gpu_util.setdefault(ev.rank, []).append(float(ev.get("gpu_util")))
            if ev.get("cpu_percent") is not None:
                util.setdefault(ev.rank, []).append(float(ev.get("cpu_percent")))
    if not ips:
        raise ScalingError(f"run {job!r} ({processes} ranks) reported no step after the {warmup} warm-up "
                           f"steps: give more --steps or fewer --warmup steps")
    kind, table = ("gpu", gpu_util) if gpu_util else ("cpu", util)
    verdict = diagnose(state) if state.timing else None
    return ScalePoint(processes, job, _median(ips), _median(step_times), len(ips), batch, frames, kind,
                      {r: sum(v) / len(v) for r, v in sorted(table.items())}, step_split(timing, warmup),
                      None if verdict is None or verdict.kind == "unknown" else verdict.to_dict())


def step_split(events: Iterable[Event], warmup: int = 0) -> dict[str, float] | None:
    """Where a step goes in a run: each rank's time-weighted shares of data / compute /
    exchange / other over its ``timing`` windows after ``warmup`` steps, averaged over ranks
    (None without such windows). The windows that start inside the warm-up are left out, like
    the step events, so start-up does not count as data wait."""
    totals: dict[int, dict[str, float]] = {}
    for ev in events:
        steps, step_s, step = ev.get("steps"), ev.get("step_s"), ev.get("step")
        if (ev.kind != "timing" or not isinstance(steps, int) or steps < 1 or not isinstance(step, int)
                or not isinstance(step_s, (int, float)) or step_s <= 0 or step - steps < warmup):
            continue
        acc = totals.setdefault(ev.rank, {"time": 0.0, "data": 0.0, "compute": 0.0, "exchange": 0.0})
        acc["time"] += step_s * steps
        for part in ("data", "compute", "exchange"):
            value = ev.get(f"{part}_s")
            acc[part] += float(value) * steps if isinstance(value, (int, float)) and value >= 0 else 0.0
    if not totals:
        return None
    per_rank = []
    for acc in totals.values():
        shares = {p: min(1.0, acc[p] / acc["time"]) for p in ("data", "compute", "exchange")}
        shares["other"] = max(0.0, 1.0 - sum(shares.values()))
        per_rank.append(shares)
    return {p: sum(s[p] for s in per_rank) / len(per_rank) for p in ("data", "compute", "exchange", "other")}


@dataclass
class ScalingReport(ChartedReport):
    """Scaling figures per rank count, relative to the smallest rank count measured.

    Args:
        points: one per rank count, in increasing order.
        mode: ``weak`` or ``strong`` (see the module docstring).
        epochs: epochs of the full run the projection is for.
        frames: training frames of the full run (default: what the runs reported).
    """

    points: list[ScalePoint]
    mode: str = "weak"
    epochs: int = 1
    frames: int | None = None
    created: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        self.points = sorted(self.points, key=lambda p: p.processes)

    @property
    def base(self) -> ScalePoint:
        return self.points[0]

    def rows(self) -> list[dict[str, Any]]:
        """Per rank count: images/s, speed-up, efficiency, exchange share, utilisation, projection."""
        b = self.base
        frames = self.frames or b.train_frames
        out = []
        for p in self.points:
            speedup = p.images_per_s / b.images_per_s
            ideal = p.processes / b.processes
            # same per-rank batch (weak): a step should take as long as with fewer ranks; what it
            # takes more is gradient exchange plus contention for shared resources
            exchange = (max(0.0, 1.0 - b.step_time_s / p.step_time_s)
                        if self.mode == "weak" and p.step_time_s == p.step_time_s and p.step_time_s > 0 else None)
            seconds = frames * self.epochs / p.images_per_s if frames else None
            out.append({
                "processes": p.processes, "job": p.job, "images_per_s": p.images_per_s, "speedup": speedup,
                "ideal": ideal, "efficiency": speedup / ideal, "exchange_share": exchange,
                "step_time_s": p.step_time_s, "steps": p.steps_measured, "batch_per_rank": p.batch_per_rank,
                "util_kind": p.util_kind, "utilisation": dict(p.utilisation), "projected_s": seconds,
                "breakdown": dict(p.breakdown) if p.breakdown else None, "verdict": p.verdict,
            })
        return out

    # ------------------------------------------------------------------ output
    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "epochs": self.epochs, "frames": self.frames, "created": self.created,
                "points": [asdict(p) for p in self.points], "rows": self.rows()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScalingReport:
        points = [ScalePoint(**{**p, "utilisation": {int(k): v for k, v in p["utilisation"].items()},
                                "verdict": _saved_verdict(p.get("verdict"))})
                  for p in data["points"]]
        return cls(points, data.get("mode", "weak"), data.get("epochs", 1), data.get("frames"),
                   data.get("created", time.time()))

    def save(self, name: str) -> str:
        """Record the report under ``$LANENB_HOME/scaling/<name>.json`` and beside each run."""
        from lanenb_trainer.atomic import write_json

        path = make_private_dir(lanenb_home() / "scaling") / f"{name}.json"
        write_json(path, self.to_dict())
        for p in self.points:
            try:
                job = get_job(p.job)
                if job.backend.runs_here and job.run_dir:
                    write_json(f"{job.run_dir}/scaling.json", {"report": str(path), **self.to_dict()})
            except UserError:
                continue
        return str(path)

    def chart(self) -> dict[str, Any]:
        """The report's Vega-Lite chart (values inline): speed-up vs ideal, throughput, step split."""
        from lanenb.charts.specs import scaling_chart

        return scaling_chart(self.rows(), self.mode)

    def table(self) -> Table:
        """The report as a table (with the speed-up chart)."""
        head = ["ranks", "images/s", "speed-up", "ideal", "efficiency", "exchange+contention",
                "utilisation per rank", f"projected: {self.frames or self.base.train_frames} frames x {self.epochs} ep",
                "step: data/compute/exchange/other", "verdict"]
        body = []
        rows = self.rows()
        for r in rows:
            util = " ".join(f"{v:.0f}" for v in r["utilisation"].values()) + (" GPU%" if r["util_kind"] == "gpu"
                                                                                 else " CPU%")
            body.append([str(r["processes"]), f"{r['images_per_s']:.1f}", f"{r['speedup']:.2f}x",
                         f"{r['ideal']:.0f}x", f"{r['efficiency']:.0%}",
                         "-" if r["exchange_share"] is None else f"{r['exchange_share']:.0%}", util,
                         "-" if r["projected_s"] is None else format_duration(r["projected_s"]),
                         _split_text(r["breakdown"]), r["verdict"]["kind"] if r["verdict"] else "-"])
        notes = [f"{r['processes']} ranks: {r['verdict']['line']}" for r in rows if r["verdict"]]
        png, why = self.png_or_reason()
        if why:
            notes.append(why)
        return Table(head, body, title=f"{self.mode} scaling (from the runs' step events, warm-up dropped)",
                     note="\n".join(notes), png=png, chart=self.chart_output())

    def __repr__(self) -> str:
        return self.table().text()


def _saved_verdict(saved: Any) -> dict[str, Any] | None:
    """A saved point's verdict: reports saved before verdicts were dicts hold the line only."""
    if isinstance(saved, str):
        kind, _, message = saved.partition(": ")
        return {"kind": kind, "message": message, "line": saved, "severity": verdict_severity(kind)}
    return saved


def _split_text(split: Mapping[str, float] | None) -> str:
    """``5/80/12/3%``: a step's data / compute / exchange / other shares; "-" for a run without
    timing (a report saved before timing existed)."""
    if not split:
        return "-"
    return "/".join(f"{100 * split.get(p, 0.0):.0f}" for p in ("data", "compute", "exchange", "other")) + "%"


def _run_one(spec: TrainSpec, timeout: float) -> Job:
    job = submit(spec)
    status = job.wait(timeout=timeout)
    if status.state.value != "succeeded":
        raise ScalingError(f"scaling run {job.name} ({spec.processes} ranks) ended {status}; "
                           f"see %lanelogs {job.name}")
    return job


def _events(job: Job) -> list[Event]:
    return [u.event for u in job.updates(follow=False) if u.event is not None]


def measure(spec: TrainSpec | Mapping[str, Any], processes: Sequence[int] = (1, 2), *, steps: int = 50,
            warmup: int = 10, mode: str = "weak", epochs: int | None = None, frames: int | None = None,
            timeout: float = 3600.0, name: str | None = None, progress: bool = True) -> ScalingReport:
    """Run ``spec`` for ``steps`` steps at each rank count and report how it scales.

    Args:
        spec: the training job (``TrainSpec`` or its fields); ``processes``, ``max_steps``,
            ``name`` and (strong mode) ``batch_size`` are set per run.
        processes: rank counts, e.g. ``[1, 2, 4]``.
        steps: steps per run; ``warmup`` of them are dropped (start-up, first allocations).
        mode: ``weak`` (same per-rank batch) or ``strong`` (same global batch: ``batch_size``
            of ``spec`` is the global batch, split over the ranks).
        epochs: epochs of the full run to project (default: the spec's).
        frames: training frames of the full run (default: what the runs reported).
        timeout: seconds each run may take.
        name: report name (default ``scale-<time>``); run names are ``<name>-n<ranks>``.

    Returns:
        A ``ScalingReport`` (a table and a speed-up chart in a notebook), also saved under
        ``$LANENB_HOME/scaling/`` and beside each run.

    Raises:
        SpecError: a bad argument, named. ScalingError: a run failed or had no usable steps.
    """
    base = spec if isinstance(spec, TrainSpec) else TrainSpec.from_dict(dict(spec))
    counts = list(processes)
    if not counts or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in counts):
        raise SpecError("processes", processes, "must be a list of rank counts >= 1, e.g. [1, 2, 4]")
    if len(set(counts)) != len(counts):
        raise SpecError("processes", processes, "lists a rank count twice")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise SpecError("steps", steps, "must be an integer >= 2")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < steps:
        raise SpecError("warmup", warmup, f"must be an integer from 0 to steps-1 ({steps - 1})")
    if mode not in ("weak", "strong"):
        raise SpecError("mode", mode, "must be weak or strong")
    if mode == "strong" and any(base.batch_size % n for n in counts):
        raise SpecError("batch_size", base.batch_size, f"strong scaling splits the global batch over "
                        f"{counts} ranks: it must be divisible by each")
    name = name or f"scale-{time.strftime('%Y%m%d-%H%M%S')}"
    runs = [base.replace(processes=n, name=f"{name}-n{n}", max_steps=steps, use_val=False,
                         epochs=max(base.epochs, 1000), run_dir=None,
                         batch_size=base.batch_size // n if mode == "strong" else base.batch_size)
            for n in sorted(counts)]
    for run in runs:  # every size is checked before the first starts: no half-measured report
        problems = validate(run)
        if problems:
            raise SpecError(problems[0].field, problems[0].value, str(problems[0]).split(": ", 1)[-1])
    points = []
    bar = None
    if progress:
        from lanenb_trainer.progress import progress_bar

        bar = progress_bar(total=len(counts), desc="scaling runs", unit="run")
    try:
        for run in runs:
            n = run.processes
            if bar is not None:
                bar.set_postfix_str(f"{n} rank(s): {run.name}")
            job = _run_one(run, timeout)
            points.append(point_from_events(n, job.name, _events(job), warmup))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    report = ScalingReport(points, mode, epochs or base.epochs, frames)
    report.save(name)
    return report


def from_jobs(names: Sequence[str | Job], *, warmup: int = 10, mode: str = "weak", epochs: int = 1,
              frames: int | None = None) -> ScalingReport:
    """Rebuild a report from recorded runs (e.g. a finished ``measure``, in a new kernel)."""
    points = []
    for item in names:
        job = item if isinstance(item, Job) else get_job(item)
        events = _events(job)
        start = next((e for e in events if e.kind == "start" and e.rank == 0), None)
        n = int(start.get("world_size")) if start is not None else job.spec.processes
        points.append(point_from_events(n, job.name, events, warmup))
    return ScalingReport(points, mode, epochs, frames)


def load(name: str) -> ScalingReport:
    """A saved report (``measure(..., name=...)``)."""
    path = lanenb_home() / "scaling" / f"{name}.json"
    try:
        return ScalingReport.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ScalingError(f"no scaling report named {name!r} in {path.parent}") from None
