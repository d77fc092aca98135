"""The sidebar and the job panel as issue 42 found them wanting, each in a real JupyterLab and
Chromium (Galata specs in extension/ui-tests/tests/sidebar_*.spec.ts), over a ``LANENB_HOME``
recorded without training (tests/support/finished_runs.py, load_jobs.py, sweep_studies.py):

- a wheel over a chart scrolls the panel; Ctrl + wheel zooms, never past the data (no negative
  time); a short run's time axis counts whole seconds once each; the log's rank filter is a select;
- long job names lose their middle, not their distinctive end;
- an opened sweep's table, charts and legends fit the sidebar's width;
- a running job's new progress reaches the sidebar within 2 s;
- the Team section without a cluster says so as a note, not as an error.

Screenshots go to ``$LANENB_ARTIFACTS/<test's folder>`` (default extension/ui-tests/test-results).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from finished_runs import record_finished_run
from galata_run import run_spec
from load_jobs import record_job
from test_lab_extension import CHROMIUM, EXTENSION

from lanenb_trainer.events import format_event
from lanenb_trainer.ranktag import tag_line

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
    pytest.mark.skipif(not (EXTENSION / "node_modules" / "@jupyterlab" / "galata").is_dir(),
                       reason="extension/node_modules is missing: run scripts/setup.sh (it runs jlpm install)"),
]

TRIALS = [f"lane-sweep-20261128-101500-trial-{n}" for n in (1, 2, 3)]


def _line(kind: str, rank: int = 0, **fields) -> str:
    return tag_line(rank, "stdout", format_event(kind, rank, **fields))


def _short_run_with_samples(home: Path, name: str, seconds: float = 2.0) -> None:
    """A finished 2-rank run whose system samples span ``seconds`` (every 0.25 s): its per-rank
    charts' time axis is a few seconds long, where Vega put a tick every 0.2 s."""
    run_dir = record_finished_run(home, name, best=0.93, last=0.92, created=2000.0)
    samples = []
    for i in range(int(seconds / 0.25) + 1):
        for rank in (0, 1):
            samples.append(_line("system", rank, t=5000.0 + i * 0.25, cpu_percent=40.0 + 5 * rank + i,
                                 rss_mb=900.0, host="node-a"))  # constant: a one-value axis
    log = run_dir / "job.log"
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:2] + samples + lines[2:]) + "\n")


def test_the_wheel_scrolls_the_job_panel_and_ctrl_wheel_zooms_within_the_data(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    _short_run_with_samples(home, "short-run")
    artifacts = run_spec("sidebar_zoom.spec.ts", "sidebar-zoom", home, tmp_path / "root", LANENB_UI_ZOOM="short-run")
    assert (artifacts / "panel-zoomed.png").stat().st_size > 5_000


def test_long_job_names_keep_their_distinctive_end(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    for n, name in enumerate(TRIALS):
        record_finished_run(home, name, best=0.9 + n / 100, last=0.9, created=1000.0 + n)
    artifacts = run_spec("sidebar_names.spec.ts", "sidebar-names", home, tmp_path / "root",
                         LANENB_UI_NAMES=",".join(TRIALS))
    assert (artifacts / "names.png").stat().st_size > 5_000


def test_an_opened_sweep_fits_the_sidebar_width(tmp_path, monkeypatch):
    from sweep_studies import Trial, record_sweep

    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    space = {"lr": "1e-3..1e-1:log", "momentum": "0.8,0.9", "weight_decay": "1e-5..1e-3:log",
             "num_workers": "2,4"}
    record_sweep("lane-fit-sweep", [
        Trial({"lr": 0.01, "momentum": 0.9, "weight_decay": 1e-4, "num_workers": 2}, [0.6, 0.7, 0.8]),
        Trial({"lr": 0.001, "momentum": 0.8, "weight_decay": 1e-5, "num_workers": 4}, [0.3], "pruned"),
        Trial({"lr": 0.02, "momentum": 0.8, "weight_decay": 5e-4, "num_workers": 2}, [0.65, 0.7]),
        Trial({"lr": 0.05, "momentum": 0.9, "weight_decay": 2e-4, "num_workers": 4}, [0.5, 0.72, 0.75]),
    ], space=space)
    artifacts = run_spec("sidebar_sweep_fit.spec.ts", "sidebar-sweep-fit", home, tmp_path / "root",
                         LANENB_UI_FIT_SWEEP="lane-fit-sweep")
    assert (artifacts / "sweep-fit.png").stat().st_size > 5_000


def test_a_running_jobs_progress_reaches_the_sidebar_within_two_seconds(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    row = record_job(home, "lane-live", state="running", created=3000.0)  # its supervisor: this process
    total = 100
    start = [_line("start", r, world_size=2, total_steps=total, engine="ddp", device="cpu", host="node-a",
                   config={"batch_size": 4, "epochs": 10}) for r in (0, 1)]
    first = _line("step", step=10, total_steps=total, epoch=0, loss=0.9, lr=0.02)
    log = Path(row["run_dir"]) / "job.log"
    log.write_text("\n".join([*start, first]) + "\n")
    steps = {str(p): _line("step", step=p, total_steps=total, epoch=p // 10, loss=1.0 / p, lr=0.02)
             for p in (30, 50, 70)}
    run_spec("sidebar_lag.spec.ts", "sidebar-lag", home, tmp_path / "root", LANENB_UI_LAG_JOB="lane-live",
             LANENB_UI_LAG_LOG=str(log), LANENB_UI_LAG_STEPS=json.dumps(steps))


def test_the_team_section_without_a_cluster_is_a_note(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    artifacts = run_spec("sidebar_team_note.spec.ts", "sidebar-team-note", home, tmp_path / "root",
                         LANENB_UI_NO_CLUSTER="1", KUBECONFIG=str(tmp_path / "no-kubeconfig"))
    assert (artifacts / "team-note.png").stat().st_size > 5_000
