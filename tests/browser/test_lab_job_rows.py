"""The sidebar's job rows read whole at JupyterLab's default sidebar width, in a real browser:
records two finished runs straight into the registry (tests/support/finished_runs.py: the events
a real run logs, no training), then runs the Galata spec extension/ui-tests/tests/job_rows.spec.ts
against a real JupyterLab over that ``LANENB_HOME``: each row's headline and verdict are shown in
full, wrapped at spaces, nothing cut or past the sidebar's edge.

Screenshots go to ``$LANENB_ARTIFACTS/job-rows`` (default extension/ui-tests/test-results/job-rows):
a folder of its own, since Playwright empties its output folder when it starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from finished_runs import record_finished_run
from galata_run import run_spec
from test_lab_extension import CHROMIUM, EXTENSION

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
    pytest.mark.skipif(not (EXTENSION / "node_modules" / "@jupyterlab" / "galata").is_dir(),
                       reason="extension/node_modules is missing: run scripts/setup.sh (it runs jlpm install)"),
]


def test_job_rows_show_the_whole_headline_and_verdict_at_the_default_width(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))  # the registry record_finished_run writes to
    record_finished_run(home, "healthy-run", best=0.941, last=0.930)
    record_finished_run(home, "slow-loader-run", best=0.912, last=0.905, data_share=0.45, created=1001.0)
    artifacts = run_spec("job_rows.spec.ts", "job-rows", home, tmp_path / "root",
                         LANENB_UI_ROWS="healthy-run,slow-loader-run")
    assert (artifacts / "job-rows.png").stat().st_size > 5_000
