"""The doctor (``lanenb.analysis.doctor``): one verdict per run from synthetic ``timing`` streams.

Each stream is shaped like a real synchronous run (``timing_stream.Run``: every rank's step
ends with the slowest rank, the others wait in the all-reduce), so the rules see what the
trainer would report for each fault, and the healthy case checks for false verdicts at every
point of the run, not only at its end.
"""

from __future__ import annotations

import statistics

import pytest
from timing_stream import Run, event, fold, jitter, window

from lanenb.analysis import doctor
from lanenb.analysis.doctor import Verdict, diagnose, suggest_workers
from lanenb.analysis.runstate import RunState

HEALTHY = {"data_s": 0.01, "h2d_s": 0.01, "compute_s": 0.40, "optimizer_s": 0.02}


def started(workers: int | None = 2, use_workers: bool = True, batch: int = 4, hosts=None) -> RunState:
    """A state after every rank's start event (the config the advice names, each rank's host)."""
    state = RunState()
    hosts = hosts or {0: "node-a", 1: "node-a"}
    for rank, host in hosts.items():
        config = {"batch_size": batch, "epochs": 1}
        if workers is not None:
            config.update(num_workers=workers, use_workers=use_workers)
        state.fold(event("start", rank, t=999.0, config=config, world_size=len(hosts), host=host,
                         engine="ddp", device="cpu"))
    return state


def healthy(rank: int, index: int) -> dict[str, float]:
    return dict(HEALTHY)


# ---------------------------------------------------------------------------- unknown
def test_before_any_timing_the_verdict_is_unknown():
    verdict = diagnose(started())
    assert verdict.kind == "unknown" and str(verdict) == "unknown: no step timing yet"


def test_one_window_is_not_enough_for_a_verdict():
    state = fold(Run().windows(lambda r, i: {"data_s": 0.5, "compute_s": 0.1}, 1), started())
    verdict = diagnose(state)
    assert verdict.kind == "unknown" and f"a verdict needs {doctor.PERSIST}" in str(verdict)


# ---------------------------------------------------------------------------- input-bound
def input_profile(data_s: float):
    return lambda r, i: {**HEALTHY, "data_s": data_s}


def test_input_bound_names_the_wait_and_the_workers_to_try():
    run = Run()
    state = fold(run.windows(input_profile(0.30), 3), started(workers=2))
    verdict = diagnose(state)
    share = 0.30 / (0.30 + 0.01 + 0.40 + 0.02 + run.exchange_s)  # data, h2d, compute, optimizer, exchange
    target = suggest_workers(2, share)
    assert str(verdict) == (f"input-bound: ranks wait {share:.0%} of each step for data; loader workers 2 -> try "
                            f"{target} (--num-workers {target}), or put the dataset on faster storage")
    assert verdict.value == pytest.approx(share) and verdict.rank is None


def test_input_bound_with_workers_off_counts_zero_workers():
    state = fold(Run().windows(input_profile(0.5), 3), started(workers=2, use_workers=False))
    assert "loader workers 0 -> try " in str(diagnose(state))


def test_input_bound_without_a_start_event_still_gives_advice():
    state = fold(Run().windows(input_profile(0.5), 3))
    verdict = diagnose(state)
    assert verdict.kind == "input-bound" and "more loader workers (--num-workers)" in verdict.action


def test_input_bound_at_the_maximum_workers_points_to_storage():
    state = fold(Run().windows(input_profile(0.5), 3), started(workers=doctor.MAX_WORKERS))
    assert "put the dataset on faster storage" in diagnose(state).action
    assert "->" not in diagnose(state).action


@pytest.mark.parametrize("workers", [0, 1, 2, 4, 8])
@pytest.mark.parametrize("share", [0.26, 0.41, 0.6, 0.8])
def test_the_suggested_workers_would_hide_the_wait(workers, share):
    """With ``w`` workers a batch takes L = w x step (the rank waits until it arrives); with
    none, L is the wait itself. The suggestion must load a batch within the busy time."""
    target = suggest_workers(workers, share)
    load = workers * 1.0 if workers else share  # per batch, a step of 1 s
    assert target > workers and target <= doctor.MAX_WORKERS
    if target < doctor.MAX_WORKERS:
        assert load / target <= (1.0 - share) + 1e-9


def test_the_example_of_the_issue():
    assert suggest_workers(2, 0.41) == 6


# ---------------------------------------------------------------------------- straggler
def straggler_profile(slow_rank: int, factor: float):
    return lambda r, i: {k: v * (factor if r == slow_rank else 1.0) for k, v in HEALTHY.items()}


def test_straggler_names_the_rank_its_ratio_and_its_host():
    hosts = {0: "node-a", 1: "node-b", 2: "node-a"}
    run = Run(ranks=3, hosts=hosts)
    state = fold(run.windows(straggler_profile(1, 1.4), 3), started(hosts=hosts))
    verdict = diagnose(state)
    assert verdict.kind == "straggler" and verdict.rank == 1 and verdict.host == "node-b"
    assert verdict.value == pytest.approx(1.4, rel=0.02)
    assert str(verdict).startswith("straggler: rank 1 is a straggler: its steps take 1.4x the others' and every "
                                   "all-reduce waits for it (host node-b); look at host node-b")


def test_straggler_comes_before_exchange_bound():
    """The others wait in the exchange for the slow rank: their exchange share is high, yet the
    cause is the rank, not the network."""
    run = Run(ranks=2, hosts={0: "node-a", 1: "node-b"})
    state = fold(run.windows(straggler_profile(0, 2.0), 3), started(hosts={0: "node-a", 1: "node-b"}))
    shares = state.breakdown()
    assert shares[1]["exchange"] >= doctor.EXCHANGE_SHARE  # the symptom exchange-bound would see
    verdict = diagnose(state)
    assert verdict.kind == "straggler" and verdict.rank == 0 and verdict.host == "node-a"


def test_a_rank_slow_at_loading_is_a_straggler_not_a_run_wide_input_problem():
    def profile(r, i):
        return {**HEALTHY, "data_s": 0.8} if r == 1 else dict(HEALTHY)

    state = fold(Run().windows(profile, 3), started(hosts={0: "node-a", 1: "node-b"}))
    mean_data = sum(b["data"] for b in state.breakdown().values()) / 2
    assert mean_data >= doctor.INPUT_SHARE  # the input rule alone would fire
    verdict = diagnose(state)
    assert verdict.kind == "straggler" and verdict.rank == 1
    assert "waiting for data" in verdict.action


def test_a_slower_rank_within_the_ratio_is_not_a_straggler():
    state = fold(Run().windows(straggler_profile(1, doctor.STRAGGLER_RATIO - 0.1), 3), started())
    assert diagnose(state).kind == "healthy"


def test_ranks_that_do_not_wait_for_the_slow_one_are_no_straggler_evidence():
    """A slower rank whose peers do not wait in the exchange (timings skewed, not synchronised)."""
    state = started()
    for i in range(3):
        t = 1010.0 + 10 * i
        state.fold(window(0, 10 * (i + 1), t, compute_s=0.4, exchange_s=0.0, step_s=0.4))
        state.fold(window(1, 10 * (i + 1), t, compute_s=0.8, exchange_s=0.0, step_s=0.8))
    assert diagnose(state).kind != "straggler"


# ---------------------------------------------------------------------------- exchange-bound
def test_exchange_bound_names_the_share_and_the_batch_to_try():
    hosts = {0: "node-a", 1: "node-b"}
    run = Run(exchange_s=0.3, hosts=hosts)
    state = fold(run.windows(healthy, 3), started(batch=4, hosts=hosts))
    share = 0.3 / (sum(HEALTHY.values()) + 0.3)
    verdict = diagnose(state)
    assert str(verdict) == (f"exchange-bound: {share:.0%} of each step is gradient exchange; larger per-rank batch "
                            f"(--batch-size 4 -> 8) or fewer, fuller nodes (now 2 hosts)")


def test_exchange_below_the_threshold_is_healthy():
    busy = sum(HEALTHY.values())
    exchange = doctor.EXCHANGE_SHARE * busy / (1 - doctor.EXCHANGE_SHARE) * 0.9
    state = fold(Run(exchange_s=exchange).windows(healthy, 3), started())
    assert diagnose(state).kind == "healthy"


# ---------------------------------------------------------------------------- gpu-underused
def gpu_state(utils: dict[int, float], samples: int = 6, startup: float | None = None) -> RunState:
    """GPU ranks with healthy windows and ``samples`` utilisation samples each during them;
    with ``startup``, rank 0 first reports 10 samples at that utilisation before any step."""
    hosts = {r: "gpu-node" for r in utils}
    state = started(hosts=hosts)
    run = Run(ranks=len(utils), device="cuda:0", hosts=hosts)
    if startup is not None:
        for k in range(10):
            state.fold(event("system", 0, t=run.t - 30 + k, gpu_util=startup))
    fold(run.windows(healthy, 3), state)
    first = min(w["t"] - w["step_s"] * w["steps"] for e in state.timing.values() for w in e["history"])
    for k in range(samples):
        for rank, util in utils.items():
            state.fold(event("system", rank, t=first + 1 + 2 * k, gpu_util=util, cpu_percent=100.0))
    return state


def test_gpu_underused_names_the_idle_gpu():
    verdict = diagnose(gpu_state({0: 95.0, 1: 93.0, 2: 61.0}))
    assert verdict.kind == "gpu-underused" and verdict.rank == 2 and verdict.value == pytest.approx(61.0)
    assert str(verdict).startswith("gpu-underused: GPU utilisation 61% on rank 2")


def test_busy_gpus_are_healthy_and_too_few_samples_say_nothing():
    assert diagnose(gpu_state({0: 95.0, 1: 91.0})).kind == "healthy"
    assert diagnose(gpu_state({0: 20.0, 1: 20.0}, samples=doctor.GPU_MIN_SAMPLES - 1)).kind == "healthy"


def test_gpu_samples_from_before_the_windows_do_not_count():
    """Utilisation during start-up (model load, first batches) is not the run's."""
    assert diagnose(gpu_state({0: 95.0, 1: 95.0}, startup=0.0)).kind == "healthy"
    assert diagnose(gpu_state({0: 95.0, 1: 95.0}, samples=0, startup=0.0)).kind == "healthy"


# ---------------------------------------------------------------------------- healthy and smoothing
def test_a_normal_two_rank_run_never_gets_a_false_verdict():
    """Every moment of a run with real variation (+-15% per part, a slow start-up window):
    the verdict is unknown until two windows, then healthy, never a cause."""
    noise = jitter(seed=7, spread=0.15)

    def profile(r, i):
        if i == 0:  # start-up: workers spawning, caches cold
            return {**HEALTHY, "data_s": 0.6}
        return noise(dict(HEALTHY))

    state = started()
    kinds = []
    for e in Run(exchange_s=0.03).windows(profile, 40):
        state.fold(e)
        kinds.append(diagnose(state).kind)
    assert set(kinds) <= {"unknown", "healthy"} and kinds[-1] == "healthy"
    verdict = diagnose(state)
    # the windows judged: the last JUDGED of the same steps on both ranks
    windows = list(zip(*(state.timing[r]["history"] for r in (0, 1))))[-doctor.JUDGED:]
    compute = statistics.median(sum(w["compute_s"] / w["step_s"] for w in pair) / 2 for pair in windows)
    assert str(verdict).startswith(f"healthy: compute {compute:.0%} of each step (data ")
    assert verdict.action == ""


def test_one_slow_window_is_not_a_verdict_two_are():
    slow = {3}

    def profile(r, i):
        return {**HEALTHY, "data_s": 0.6} if i in slow else dict(HEALTHY)

    run = Run()
    state = fold(run.windows(profile, 5), started())
    assert diagnose(state).kind == "healthy"
    slow.update({5, 6})
    fold(run.windows(profile, 2), state)
    assert diagnose(state).kind == "input-bound"


def test_a_straggler_in_one_window_only_is_not_named():
    def profile(r, i):
        return {k: v * (2.0 if (r == 1 and i == 2) else 1.0) for k, v in HEALTHY.items()}

    state = fold(Run().windows(profile, 4), started())
    assert diagnose(state).kind == "healthy"


def test_short_windows_after_a_pause_are_not_judged():
    """The flush at an epoch's end and the first steps after validation make 1-2-step windows:
    one slow step in them (a rank reloading its loader workers) weighs as much as a whole window,
    so two of them in a row would name a straggler over a healthy run. They are skipped."""
    run = Run()
    state = fold(run.windows(healthy, 4), started())
    short = Run(steps=1, step=run.step, t=run.t)
    fold(short.windows(lambda r, i: {k: v * (1.8 if r == 0 else 1.0) for k, v in HEALTHY.items()}, 2), state)
    assert diagnose(state).kind == "healthy"
    # the same slowness over full windows is a straggler
    run.step, run.t = short.step, short.t
    fold(run.windows(lambda r, i: {k: v * (1.8 if r == 0 else 1.0) for k, v in HEALTHY.items()}, 2), state)
    verdict = diagnose(state)
    assert (verdict.kind, verdict.rank) == ("straggler", 0)


def test_a_cause_that_ends_is_no_longer_named():
    def profile(r, i):
        return {**HEALTHY, "data_s": 0.6} if i < 3 else dict(HEALTHY)

    run = Run()
    state = fold(run.windows(profile, 3), started())
    assert diagnose(state).kind == "input-bound"
    fold(run.windows(profile, 2), state)
    assert diagnose(state).kind == "healthy"


def test_windows_are_aligned_by_step_when_one_rank_reports_later():
    """Rank 0's newest window arrived, rank 1's not yet: the rule compares the same steps."""
    run = Run(hosts={0: "node-a", 1: "node-b"})
    events = list(run.windows(straggler_profile(1, 1.6), 3))
    state = fold(events[:-1], started(hosts={0: "node-a", 1: "node-b"}))  # rank 1's last window missing
    verdict = diagnose(state)
    assert verdict.kind == "straggler" and verdict.rank == 1


# ---------------------------------------------------------------------------- the line
@pytest.mark.parametrize("verdict", [
    Verdict("input-bound", "ranks wait 41% of each step for data", "loader workers 2 -> try 6", value=0.41),
    Verdict("healthy", "compute 86% of each step (data 3%, exchange 8%)", value=0.86),
    Verdict("unknown", "no step timing yet"),
])
def test_the_line_starts_with_the_kind_and_to_dict_carries_it(verdict):
    line = str(verdict)
    assert line.split(":", 1)[0] == verdict.kind and verdict.message in line
    assert (f"; {verdict.action}" in line) == bool(verdict.action)
    data = verdict.to_dict()
    assert data["line"] == line and data["kind"] == verdict.kind and data["value"] == verdict.value
