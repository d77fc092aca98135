"""The doctor's advice as an action: an input-bound verdict that names the loader workers to
try carries them as a setting ``job.resume`` applies (``change``), and after a resume the
verdict judges only the new launch's windows, so it says whether the change helped."""

from __future__ import annotations

from test_doctor_verdicts import HEALTHY, input_profile, started
from timing_stream import Run, event, fold

from lanenb.analysis import doctor
from lanenb.analysis.doctor import diagnose, shown_verdict, suggest_workers


def test_an_input_bound_verdict_carries_the_workers_to_try_as_a_change():
    state = fold(Run().windows(input_profile(0.30), 3), started(workers=2))
    verdict = diagnose(state)
    target = suggest_workers(2, verdict.value)
    assert verdict.change == {"setting": "num_workers", "value": target}
    assert f"loader workers 2 -> try {target}" in verdict.action
    assert verdict.to_dict()["change"] == {"setting": "num_workers", "value": target}


def test_advice_that_is_not_one_setting_carries_no_change():
    unknown_workers = fold(Run().windows(input_profile(0.5), 3))
    at_max = fold(Run().windows(input_profile(0.5), 3), started(workers=doctor.MAX_WORKERS))
    healthy = fold(Run().windows(lambda r, i: dict(HEALTHY), 3), started())
    for state in (unknown_workers, at_max, healthy):
        assert diagnose(state).change is None and diagnose(state).to_dict()["change"] is None


def test_after_a_resume_the_verdict_judges_the_new_launch_only():
    run = Run()
    relaunched = fold(run.windows(input_profile(0.30), 3), started(workers=2))
    assert diagnose(relaunched).kind == "input-bound"
    # the relaunch with 6 workers: start events, rank 0's resumed, then one window of the new launch
    for rank in range(2):
        relaunched.fold(event("start", rank, t=run.t, config={"batch_size": 4, "num_workers": 6, "use_workers": True},
                              world_size=2, host="node-a", engine="ddp", device="cpu"))
    relaunched.fold(event("resumed", 0, t=run.t, count=1, step=run.step, steps_lost=0, steps_lost_total=0))
    fold(run.windows(lambda r, i: dict(HEALTHY), 1), relaunched)
    verdict = shown_verdict(relaunched)
    assert verdict is not None and verdict.kind == "unknown" and "1 timing window so far" in verdict.message
    fold(run.windows(lambda r, i: dict(HEALTHY), 1), relaunched)
    assert diagnose(relaunched).kind == "healthy"  # the change helped, and the view says so


def _relaunch(state, run: Run, workers: int, count: int = 1) -> None:
    """The next launch's start events (with ``workers`` loader workers) and rank 0's resumed."""
    for rank in range(2):
        state.fold(event("start", rank, t=run.t, config={"batch_size": 4, "num_workers": workers, "use_workers": True},
                         world_size=2, host="node-a", engine="ddp", device="cpu"))
    state.fold(event("resumed", 0, t=run.t, count=count, step=run.step, steps_lost=0, steps_lost_total=0))


def _share(data_s: float, run: Run) -> float:
    return data_s / (data_s + 0.01 + 0.40 + 0.02 + run.exchange_s)  # data, h2d, compute, optimizer, exchange


def test_after_applied_workers_the_next_verdict_says_the_change_helped():
    run = Run()
    state = fold(run.windows(input_profile(0.30), 3), started(workers=2))
    _relaunch(state, run, workers=6)
    fold(run.windows(input_profile(0.02), 1), state)
    assert "after" not in diagnose(state).message  # one new window: no verdict yet, no comparison
    fold(run.windows(input_profile(0.02), 2), state)
    verdict = diagnose(state)
    was, now = _share(0.30, run), _share(0.02, run)
    assert verdict.kind == "healthy"
    assert str(verdict).endswith(f"; after loader workers 2 -> 6: data wait {was:.0%} -> {now:.0%} of step time "
                                 f"(helped)")
    assert shown_verdict(state) == verdict and verdict.severity == "ok"


def test_after_applied_workers_that_did_not_help_the_verdict_says_so_before_its_next_advice():
    run = Run()
    state = fold(run.windows(input_profile(0.30), 3), started(workers=2))
    _relaunch(state, run, workers=3)
    fold(run.windows(input_profile(0.29), 3), state)  # the storage, not the workers, is the limit
    verdict = diagnose(state)
    was, now = _share(0.30, run), _share(0.29, run)
    assert verdict.kind == "input-bound"
    assert (f"; after loader workers 2 -> 3: data wait {was:.0%} -> {now:.0%} of step time (did not help); "
            f"loader workers 3 -> try") in str(verdict)


def test_a_resume_that_changed_no_setting_adds_no_clause():
    run = Run()
    state = fold(run.windows(input_profile(0.30), 3), started(workers=2))
    _relaunch(state, run, workers=2)  # a preemption: the same settings
    fold(run.windows(input_profile(0.02), 3), state)
    assert diagnose(state).kind == "healthy" and "after" not in str(diagnose(state))


def test_a_launch_killed_before_its_first_window_keeps_the_baseline_of_the_one_before():
    run = Run()
    state = fold(run.windows(input_profile(0.30), 3), started(workers=2))
    _relaunch(state, run, workers=6, count=1)  # Apply: 6 workers, killed before a window
    _relaunch(state, run, workers=6, count=2)  # restarted with the same 6
    fold(run.windows(input_profile(0.02), 3), state)
    assert "after loader workers 2 -> 6: data wait" in str(diagnose(state))
    assert state.previous_launch is not None and state.previous_launch["config"]["num_workers"] == 2
