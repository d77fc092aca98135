"""Local jobs under races and faults (issue 51): a seeded soak that prints what it found.

Each trial submits a small real MPI job through the Job API (the local backend: supervisor,
mpirun, a rank guard per rank) and does one fault drawn at random from:

- ``kill-rank``: SIGKILL to one rank;
- ``kill-mpirun``: SIGKILL to mpirun;
- ``kill-supervisor``: SIGKILL to the supervisor;
- ``cancel``: ``job.cancel()`` at a random moment (before, during or after the ranks' start);
- ``suspend-resume``: suspend, then resume while two other readers poll the status;
- ``double-resume``: suspend, then two resumes at once (one must win, the other be told);
- ``same-name``: four submits of one name at once (exactly one accepted).

After each trial the job is waited for (or cancelled) and three things are checked:

- **untruthful**: the state every reader agrees on contradicts the processes (``running`` with
  no process of the job alive, or a final state with one still alive), or ``lost`` for a job
  whose newest attempt still runs;
- **left**: processes carrying the job's marker still alive once it has ended;
- **lost records**: submitted jobs missing from ``list_jobs()``.

Prints the CPU, then one row per fault kind and a total. Goals: 0, 0 and 0.

    python3 bench/soak.py --trials 34 --seed 0      # ~4 min on 2 cores
    python3 bench/soak.py --trials 7 --seed 1        # CI's size (tests/jobs/test_soak_bench.py)
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchutil import cpu_label

KINDS = ("kill-rank", "kill-mpirun", "kill-supervisor", "cancel", "suspend-resume", "double-resume", "same-name")

# a rank that prints, works a few seconds and ends; on SIGTERM it says so and leaves, as the trainer does
RANK = textwrap.dedent(
    """
    import os, signal, sys, time
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    def stop(signum, frame):
        print(f"rank {rank} stopping", flush=True)
        os._exit(75)
    signal.signal(signal.SIGTERM, stop)
    print(f"rank {rank} working", flush=True)
    for i in range(int(sys.argv[1])):
        print(f"rank {rank} step {i}", flush=True)
        time.sleep(0.05)
    """
)


@dataclass
class Tally:
    trials: int = 0
    untruthful: int = 0
    left: int = 0
    seconds: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _alive(job) -> list:
    """The job's processes still running (the backend's own proof: start times and the job's marker)."""
    return [p for p in job.backend._group_processes(job.handle) if p.is_running() and p.status() != "zombie"]


def _pids(job, name: str) -> list[int]:
    """mpirun's or a rank's pid, as the rank guards recorded them (rank-<R>.json)."""
    import json

    if name == "supervisor":
        return [int(job.handle["pid"])]
    folder = Path(job.run_dir) / "pids"
    ranks = []
    for path in sorted(folder.glob("rank-*.json")):
        try:
            ranks.append(int(json.loads(path.read_text())["pid"]))
        except (OSError, ValueError, KeyError):
            continue
    if name == "mpirun":
        import psutil

        parents = set()
        for pid in ranks:
            try:
                parents.add(psutil.Process(pid).ppid())
            except psutil.Error:
                continue
        return sorted(parents)
    return ranks


def _working(job, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(line.text.endswith("working") for line in job.logs()):
            return True
        time.sleep(0.05)
    return False


def _check(job, tally: Tally, kind: str) -> None:
    """Wait for the end (cancel what a fault left running), then compare the state with the processes."""
    from lanenb.jobs import JobState, get_job

    try:
        status = job.wait(timeout=30)
    except TimeoutError:
        status = job.status()
    if status.state in (JobState.SUSPENDED, JobState.RUNNING, JobState.RESTARTING, JobState.PENDING):
        live = _alive(job)
        if status.state is JobState.RUNNING and not live:
            tally.untruthful += 1
            tally.notes.append(f"{kind}: {job.name} reads running with no process alive")
        if status.state is JobState.SUSPENDED and live:
            tally.untruthful += 1
            tally.notes.append(f"{kind}: {job.name} reads suspended with {len(live)} process(es) alive")
        t0 = time.monotonic()
        status = job.cancel()
        tally.seconds.append(time.monotonic() - t0)
    time.sleep(0.2)
    seen = get_job(job.name).status()
    live = _alive(get_job(job.name))
    if seen.state.finished and live:
        tally.untruthful += 1
        tally.notes.append(f"{kind}: {job.name} reads {seen.state.value} with {len(live)} process(es) alive")
    if live:
        tally.left += len(live)
        for proc in live:
            try:
                proc.kill()
            except Exception:  # gone meanwhile
                pass


def trial(kind: str, rng: random.Random, workdir: Path, index: int, program: list[str], tally: Tally,
          names: list[str]) -> None:
    from lanenb.jobs import JobExistsError, JobStateError, TrainSpec, get_job, submit

    name = f"soak-{index}-{kind}"
    run_dir = workdir / name
    spec = TrainSpec(dataset=str(workdir), processes=2, run_dir=str(run_dir), name=name, max_restarts=1)
    steps = rng.randint(40, 120)
    start = lambda: submit(spec, program=[*program, str(steps)], trainer_args=False, grace=3.0)  # noqa: E731
    tally.trials += 1
    if kind == "same-name":
        outcomes: list[str] = []

        def one() -> None:
            try:
                start()
                outcomes.append("accepted")
            except JobExistsError:
                outcomes.append("refused")

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        names.append(name)
        if Counter(outcomes) != Counter({"accepted": 1, "refused": 3}):
            tally.untruthful += 1
            tally.notes.append(f"same-name: {sorted(outcomes)}")
        _check(get_job(name), tally, kind)
        return
    job = start()
    names.append(name)
    if kind == "cancel":
        time.sleep(rng.uniform(0.0, 1.5))
        t0 = time.monotonic()
        job.cancel()
        tally.seconds.append(time.monotonic() - t0)
        _check(job, tally, kind)
        return
    if not _working(job):
        tally.notes.append(f"{kind}: {name} never started")
        _check(job, tally, kind)
        return
    if kind.startswith("kill-"):
        target = kind.split("-", 1)[1]
        pids = _pids(job, "rank" if target == "rank" else target)
        if pids:
            try:
                os.kill(rng.choice(pids), signal.SIGKILL)
            except ProcessLookupError:
                pass
        _check(job, tally, kind)
        return
    t0 = time.monotonic()
    job.suspend()
    tally.seconds.append(time.monotonic() - t0)
    stop = threading.Event()

    def reader() -> None:  # another kernel, the sidebar, `lanenb jobs show` in a loop
        while not stop.is_set():
            try:
                get_job(name).status()
            except Exception:  # a reader's error is not the soak's subject
                pass
            time.sleep(0.01)

    readers = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
    for r in readers:
        r.start()
    results: list[str] = []

    def resume() -> None:
        try:
            results.append(get_job(name).resume().state.value)
        except JobStateError:
            results.append("refused")

    resumers = [threading.Thread(target=resume) for _ in range(2 if kind == "double-resume" else 1)]
    for r in resumers:
        r.start()
    for r in resumers:
        r.join()
    stop.set()
    for r in readers:
        r.join()
    ok = ["running"] if kind == "suspend-resume" else ["refused", "running"]
    if sorted(results) != ok:
        tally.untruthful += 1
        tally.notes.append(f"{kind}: resumes answered {sorted(results)} (want {ok})")
    state = get_job(name).status().state.value
    if state == "lost" and _alive(get_job(name)):
        tally.untruthful += 1
        tally.notes.append(f"{kind}: {name} reads lost while its new attempt runs")
    _check(get_job(name), tally, kind)


def soak(trials: int, seed: int, kinds: tuple[str, ...] = KINDS) -> tuple[dict[str, Tally], int]:
    """Run ``trials`` seeded trials (every kind at least once when there are enough); returns
    the tallies per kind and how many submitted jobs the registry lost."""
    from lanenb.jobs import list_jobs

    rng = random.Random(seed)
    plan = list(kinds[:trials]) + [rng.choice(kinds) for _ in range(max(0, trials - len(kinds)))]
    rng.shuffle(plan)
    tallies: dict[str, Tally] = defaultdict(Tally)
    names: list[str] = []
    with tempfile.TemporaryDirectory(prefix="lanenb-soak-") as tmp:
        workdir = Path(tmp)
        os.environ.setdefault("LANENB_HOME", str(workdir / "home"))
        script = workdir / "rank.py"
        script.write_text(RANK)
        program = [sys.executable, str(script)]
        for i, kind in enumerate(plan):
            trial(kind, rng, workdir, i, program, tallies[kind], names)
        recorded = {j.name for j in list_jobs()}
        lost = sum(1 for n in set(names) if n not in recorded)
    return dict(tallies), lost


def table(tallies: dict[str, Tally], lost: int) -> str:
    rows = [f"{'fault':<16} {'trials':>6} {'untruthful':>10} {'left':>5} {'stop s (median)':>16}"]
    for kind in KINDS:
        t = tallies.get(kind)
        if t is None:
            continue
        secs = sorted(t.seconds)
        median = f"{secs[len(secs) // 2]:.2f}" if secs else "-"
        rows.append(f"{kind:<16} {t.trials:>6} {t.untruthful:>10} {t.left:>5} {median:>16}")
    total = Tally(sum(t.trials for t in tallies.values()), sum(t.untruthful for t in tallies.values()),
                  sum(t.left for t in tallies.values()))
    rows.append(f"{'total':<16} {total.trials:>6} {total.untruthful:>10} {total.left:>5}")
    rows.append(f"records lost: {lost}")
    notes = [n for t in tallies.values() for n in t.notes]
    rows += [f"  note: {n}" for n in notes]
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=34)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    print(f"CPU: {cpu_label()}")
    t0 = time.monotonic()
    tallies, lost = soak(args.trials, args.seed)
    print(table(tallies, lost))
    print(f"({args.trials} trials, seed {args.seed}, {time.monotonic() - t0:.0f} s)")
    bad = sum(t.untruthful + t.left for t in tallies.values()) + lost
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
