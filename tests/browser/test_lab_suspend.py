"""Suspend and Resume from the sidebar, in a real browser, on a real training job: submits a
2-rank local job (the real trainer, tiny synthetic data, enough epochs to be still running),
then runs the Galata spec extension/ui-tests/tests/suspend.spec.ts against a real JupyterLab
over that ``LANENB_HOME``: the row's Suspend button checkpoints every rank (the row reads
``suspended``), its Resume button starts them again; the run's events then say it continued
from the checkpoint with no step lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from galata_run import run_spec
from test_lab_extension import CHROMIUM, EXTENSION

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
    pytest.mark.skipif(not (EXTENSION / "node_modules" / "@jupyterlab" / "galata").is_dir(),
                       reason="extension/node_modules is missing: run scripts/setup.sh (it runs jlpm install)"),
    pytest.mark.slow,
]


def test_suspend_and_resume_buttons_pause_a_real_run_and_lose_no_step(tmp_path, monkeypatch):
    from lanenb.jobs import JobState, TrainSpec, get_job, submit
    from lanenb_trainer.data.synth import synthesize

    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    data = tmp_path / "tusimple"
    synthesize(data, 48, seed=3, width=320, height=180, test_fraction=0.25, progress=False)
    spec = TrainSpec(dataset=str(data), processes=2, engine="ddp", batch_size=4, epochs=200, use_val=False,
                     name="lane-pause", env={"LANENB_THREADS": "1"},
                     extra_args=["--img-height", "64", "--img-width", "160", "--log-every", "1",
                                 "--warmup-steps", "2", "--system-interval", "5", "--no-tensorboard"])
    job = submit(spec)
    try:
        for ev in job.events(follow=True):
            if ev.kind == "step":
                break
        run_spec("suspend.spec.ts", "suspend", home, tmp_path / "root", LANENB_UI_JOB=job.name)
        again = get_job(job.name)
        resumed = []
        for ev in again.events(follow=True):
            if ev.kind == "resumed":
                resumed.append(ev)
            if ev.kind == "step" and resumed:
                break
        assert len(resumed) == 1 and resumed[0]["steps_lost"] == 0 and resumed[0]["preempted"] is True
    finally:
        assert get_job(job.name).cancel().state in (JobState.CANCELLED, JobState.SUCCEEDED)
