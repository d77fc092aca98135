"""Injected faults for the run doctor, shared by tests/doctor, tests/multihost and
bench/doctor_delay.py: a run watched the way a view watches it, faults switched on from outside
the run at a known moment, and the delay until the verdict names them.

The watcher is what every face does: fold ``Job.poll`` updates (or a simulated cluster's lines)
into one ``RunState`` and ask ``diagnose(state)``; it records each verdict with the moment it was
first seen (monotonic clock), so "verdict within 30 s of the fault starting" is measured from the
moment the fault was switched on to the moment a watcher could show the verdict.

The faults never touch the training code path users run:

- :class:`SlowReads`: the dataset served slowly (``slow_reader/sitecustomize.py`` on the ranks'
  ``PYTHONPATH`` wraps the frame read; a file this side creates turns the sleep on);
- :class:`DutyCycle`: one rank slowed from outside, as a CPU quota slows it (SIGSTOP / SIGCONT);
- a rate-limited link (tc htb) is ``SimCluster.shape`` in tests/multihost/cluster_support.

No pytest here: the bench imports this module too.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanenb.analysis.doctor import Verdict, diagnose
from lanenb.analysis.runstate import RunState
from lanenb.backends.local.supervise import PIDS_NAME
from lanenb.jobs import Job, TrainSpec, submit
from lanenb_trainer.events import Event

HERE = Path(__file__).resolve().parent
SLOW_READER = HERE / "slow_reader"  # the folder holding the throttling sitecustomize.py
SLOW_READS_VAR = "LANENB_TEST_SLOW_READS"  # the flag file's path (sitecustomize.FLAG_VAR)
VERDICT_DEADLINE_S = 30.0  # the promise: a fault is named within 30 s of its start
BASELINE_WINDOWS = 2  # timing windows per rank before a fault starts: the run is past its start-up
START_TIMEOUT_S = 180.0  # submit -> the baseline windows (torch import, rendezvous, first steps)
# 64x160 frames, 2 frames per rank: a step of tens of milliseconds, so windows of the default
# --timing-every 10 steps come every second or two and a verdict has data soon after a fault.
TINY_ARGS = ["--img-height", "64", "--img-width", "160", "--log-every", "1", "--warmup-steps", "2",
             "--seed", "7"]


def make_dataset(root: Path, frames: int = 96) -> Path:
    """A small synthetic TuSimple root (``lanenb data synth``'s generator) under ``root``."""
    from lanenb_trainer.data.synth import synthesize

    out = root / "tusimple"
    synthesize(out, frames, seed=3, width=320, height=180, test_fraction=0.1, progress=False)
    return out


def doctor_spec(data: Path, run_dir: Path, *, epochs: int = 200, use_val: bool = False,
                env: dict[str, str] | None = None, extra: list[str] | None = None, **kw: Any) -> TrainSpec:
    """A 2-rank CPU ddp run of the small model on tiny frames; long (``epochs``) unless the
    test lets it finish: a fault test cancels it once the verdict is in."""
    return TrainSpec(dataset=str(data), processes=2, engine="ddp", batch_size=2, epochs=epochs,
                     use_val=use_val, run_dir=str(run_dir), env={"LANENB_THREADS": "1", **(env or {})},
                     extra_args=[*TINY_ARGS, *(extra or [])], **kw)


# ---------------------------------------------------------------------------------- watching
Feed = Callable[[RunState], tuple[list[Event], bool]]  # fold what is new; (its events, final)


def job_feed(job: Job) -> Feed:
    """A job's updates through ``Job.poll`` (what the live view, the sidebar and the CLI do)."""
    cursor: str | None = None

    def feed(state: RunState) -> tuple[list[Event], bool]:
        nonlocal cursor
        batch = job.poll(cursor)
        state.apply_all(batch.updates)
        cursor = batch.cursor
        return [u.event for u in batch.updates if u.event is not None], batch.final

    return feed


@dataclass
class Sighting:
    """A verdict the watcher saw first at monotonic time ``t``, at global step ``step``."""

    t: float
    step: int
    verdict: Verdict

    def __str__(self) -> str:
        return f"t={self.t:.1f} step={self.step} {self.verdict}"


@dataclass
class VerdictWatch:
    """Folds a feed into one ``RunState`` and records every verdict whose kind or rank changed."""

    feed: Feed
    interval: float = 0.2  # seconds between polls (the live view refreshes about as often)
    state: RunState = field(default_factory=RunState)
    sightings: list[Sighting] = field(default_factory=list)
    windows: dict[int, int] = field(default_factory=dict)  # rank -> timing events seen
    final: bool = False
    verdict: Verdict | None = None

    def pump(self) -> Verdict:
        """One poll: fold, diagnose, record the verdict if it is news."""
        events, self.final = self.feed(self.state)
        for ev in events:
            if ev.kind == "timing":
                self.windows[ev.rank] = self.windows.get(ev.rank, 0) + 1
        verdict = diagnose(self.state)
        last = self.sightings[-1].verdict if self.sightings else None
        if last is None or (last.kind, last.rank) != (verdict.kind, verdict.rank):
            self.sightings.append(Sighting(time.monotonic(), self.state.step, verdict))
        self.verdict = verdict
        return verdict

    def min_windows(self, ranks: int) -> int:
        """Timing windows seen from the rank that sent fewest (0 until all ``ranks`` sent one)."""
        return min((self.windows.get(r, 0) for r in range(ranks)), default=0)

    def until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Poll until ``done()`` (True), the run is final or ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        while True:
            self.pump()
            if done():
                return True
            if self.final or time.monotonic() >= deadline:
                return False
            time.sleep(self.interval)

    def first(self, wanted: Callable[[Verdict], bool], since: float) -> Sighting | None:
        """The first sighting at or after ``since`` whose verdict is ``wanted``."""
        return next((s for s in self.sightings if s.t >= since and wanted(s.verdict)), None)

    def story(self) -> str:
        """Every sighting, one a line, then the timing windows the last verdict read (for
        assertion messages: a wrong verdict shows its evidence)."""
        lines = [str(s) for s in self.sightings] or ["(no verdict)"]
        for rank, entry in sorted(self.state.timing.items()):
            for w in entry.get("history", []):
                parts = " ".join(f"{k}={w[k]:.3f}" for k in ("step_s", "data_s", "compute_s", "exchange_s")
                                 if isinstance(w.get(k), float))
                lines.append(f"  rank {rank} window to step {w.get('step')} ({w.get('steps')} steps): {parts}")
        return "\n".join(lines)


@dataclass
class FaultOutcome:
    """What one injected fault produced: the verdict before it, the first wanted verdict after it
    and how long after the fault's start that came (``None``: not within the deadline)."""

    before: Verdict
    hit: Sighting | None
    delay_s: float | None
    story: str
    log_tail: str = ""

    def explain(self) -> str:
        return f"before the fault: {self.before}\nverdicts:\n{self.story}\nlog tail:\n{self.log_tail}"


def watch_fault(watch: VerdictWatch, ranks: int, switch_on: Callable[[], None],
                wanted: Callable[[Verdict], bool], *, deadline: float = VERDICT_DEADLINE_S,
                start_timeout: float = START_TIMEOUT_S) -> FaultOutcome:
    """Wait for ``BASELINE_WINDOWS`` timing windows from every rank, switch the fault on (its start
    is the moment ``switch_on`` returns) and watch until a ``wanted`` verdict or ``deadline`` (a few
    seconds past it, so a late verdict is still measured)."""
    if not watch.until(lambda: watch.min_windows(ranks) >= BASELINE_WINDOWS, start_timeout):
        raise AssertionError(f"no {BASELINE_WINDOWS} timing windows from each of {ranks} ranks within "
                             f"{start_timeout:g} s (seen {watch.windows}, final={watch.final}):\n{watch.story()}")
    before = watch.pump()
    switch_on()
    started = time.monotonic()
    watch.until(lambda: watch.first(wanted, started) is not None, deadline + 10.0)
    hit = watch.first(wanted, started)
    return FaultOutcome(before=before, hit=hit, delay_s=None if hit is None else hit.t - started,
                        story=watch.story())


def busy_elsewhere(threshold: float = 20.0, interval: float = 0.5) -> str:
    """Other processes using CPU now (percent of one core over ``interval``), for assertion
    messages: on a small machine another job makes one rank really slower, and the doctor then
    rightly names a straggler; the message should say so."""
    import psutil

    me = os.getpid()
    procs = [p for p in psutil.process_iter(["cmdline"]) if p.pid != me]
    for p in procs:
        try:
            p.cpu_percent(None)
        except psutil.Error:
            pass
    time.sleep(interval)
    busy = []
    for p in procs:
        try:
            pct = p.cpu_percent(None)
        except psutil.Error:
            continue
        if pct >= threshold:
            busy.append(f"{pct:.0f}% pid {p.pid} {' '.join(p.info['cmdline'] or [])[:120]}")
    return ("\nother processes using CPU now: " + "; ".join(busy)) if busy else "\nno other process using CPU now"


def log_tail(job: Job, lines: int = 40) -> str:
    return "\n".join(str(line) for line in list(job.logs())[-lines:])


def stop_job(job: Job, timeout: float = 60.0) -> None:
    """Cancel (a no-op for a finished job) and wait until it is final: no rank outlives a test."""
    job.cancel()
    job.wait(timeout=timeout)


# ---------------------------------------------------------------------------------- faults
class SlowReads:
    """The dataset served slowly: every frame read sleeps ``seconds`` once :meth:`start` ran.

    ``env()`` goes into the job spec's ``env``: the ranks then load ``slow_reader/sitecustomize.py``,
    which wraps the frame read and sleeps while the flag file exists.
    """

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.flag = folder / "slow-reads"

    def env(self) -> dict[str, str]:
        path = os.pathsep.join(p for p in (str(SLOW_READER), os.environ.get("PYTHONPATH", "")) if p)
        return {"PYTHONPATH": path, SLOW_READS_VAR: str(self.flag)}

    def start(self, seconds: float) -> None:
        """Every read from now on sleeps ``seconds`` (an atomic write: no read sees half a number)."""
        tmp = self.flag.with_name(self.flag.name + ".tmp")
        tmp.write_text(f"{seconds}\n")
        os.replace(tmp, self.flag)

    def stop(self) -> None:
        self.flag.unlink(missing_ok=True)


def rank_pid(job: Job, rank: int, timeout: float = 60.0) -> int:
    """Rank ``rank``'s pid, from the local backend's ``pids/rank-<R>.json`` (the rank guard
    writes it before exec'ing the trainer), checked against the process's MPI rank."""
    import psutil

    path = Path(str(job.run_dir)) / PIDS_NAME / f"rank-{rank}.json"
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} not written within {timeout:g} s")
        time.sleep(0.1)
    pid = int(json.loads(path.read_text())["pid"])
    env_rank = psutil.Process(pid).environ().get("OMPI_COMM_WORLD_RANK")
    if env_rank != str(rank):
        raise AssertionError(f"pid {pid} from {path} is rank {env_rank!r}, not {rank}")
    return pid


class DutyCycle:
    """Slows process ``pid`` from outside, as a CPU quota does: stopped (SIGSTOP) for ``stopped_s``
    of every ``period_s``, then continued (SIGCONT). :meth:`stop` always leaves it running."""

    def __init__(self, pid: int, stopped_s: float = 0.05, period_s: float = 0.1) -> None:
        if not 0 < stopped_s < period_s:
            raise ValueError(f"stopped_s={stopped_s} must be in (0, period_s={period_s})")
        self.pid, self.stopped_s, self.period_s = pid, stopped_s, period_s
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"duty-cycle-{pid}", daemon=True)

    def _run(self) -> None:
        running = self.period_s - self.stopped_s
        while not self._halt.wait(running):
            try:
                os.kill(self.pid, signal.SIGSTOP)
                try:
                    time.sleep(self.stopped_s)
                finally:
                    os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                return

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def __enter__(self) -> DutyCycle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------- scenarios
def input_bound_run(data: Path, work: Path, *, read_sleep_s: float = 0.1) -> tuple[FaultOutcome, Job]:
    """A 2-rank run whose dataset turns slow (``read_sleep_s`` per frame) once it is past start-up."""
    slow = SlowReads(work / "fault")
    job = submit(doctor_spec(data, work / "run", env=slow.env()))
    try:
        watch = VerdictWatch(job_feed(job))
        outcome = watch_fault(watch, 2, lambda: slow.start(read_sleep_s), lambda v: v.kind == "input-bound")
        outcome.log_tail = log_tail(job)
    finally:
        slow.stop()
        stop_job(job)
    return outcome, job


def straggler_run(data: Path, work: Path, *, rank: int = 1, stopped_s: float = 0.05,
                  period_s: float = 0.1) -> tuple[FaultOutcome, Job]:
    """A 2-rank run whose rank ``rank`` is slowed from outside (a SIGSTOP duty cycle) once it is
    past start-up."""
    job = submit(doctor_spec(data, work / "run"))
    cycle: DutyCycle | None = None
    try:
        cycle = DutyCycle(rank_pid(job, rank), stopped_s, period_s)
        watch = VerdictWatch(job_feed(job))
        outcome = watch_fault(watch, 2, cycle.start, lambda v: v.kind == "straggler")
        outcome.log_tail = log_tail(job)
    finally:
        if cycle is not None:
            cycle.stop()
        stop_job(job)
    return outcome, job
