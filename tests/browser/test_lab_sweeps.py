"""A sweep in the JupyterLab sidebar, in a real browser: records a small sweep straight into its
Optuna study (tests/support/sweep_studies.py: trials as the driver records them, no training),
then runs the Galata spec extension/ui-tests/tests/sweeps.spec.ts against a real JupyterLab over
that ``LANENB_HOME``: the sweep is listed, opens with its trials table and pruned-why text, and
its chart renders.

Screenshots go to ``$LANENB_ARTIFACTS/sweeps`` (default extension/ui-tests/test-results/sweeps):
a folder of its own, since Playwright empties its output folder when it starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from galata_run import run_spec
from sweep_studies import Trial, record_sweep
from test_lab_extension import CHROMIUM, EXTENSION

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
    pytest.mark.skipif(not (EXTENSION / "node_modules" / "@jupyterlab" / "galata").is_dir(),
                       reason="extension/node_modules is missing: run scripts/setup.sh (it runs jlpm install)"),
]


def test_a_sweep_opens_in_the_sidebar_with_its_trials_and_chart(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LANENB_HOME", str(home))
    record_sweep("ui-sweep", [Trial({"lr": 0.01, "momentum": 0.9}, [0.6, 0.7, 0.8]),
                              Trial({"lr": 0.001, "momentum": 0.8}, [0.3], "pruned"),
                              Trial({"lr": 0.02, "momentum": 0.8}, [0.65, 0.7])])
    from lanenb.sweeps import attach

    why = attach("ui-sweep").trials()[1].why
    artifacts = run_spec("sweeps.spec.ts", "sweeps", home, tmp_path / "root", LANENB_UI_SWEEP="ui-sweep",
                         LANENB_UI_SWEEP_WHY=why or "")
    assert (artifacts / "sweep-sidebar.png").stat().st_size > 10_000
