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
