"""The sidebar's Team section in a real browser: the emulated cluster of
``tests/k8s/team_scenario.py`` runs in this process (several users' jobs, a GPU-starved one, a
quota, RBAC), the Jupyter server reaches it as alice (read and stop in team-a only, through
``KUBECONFIG``), and the Galata spec extension/ui-tests/tests/team.spec.ts opens the section.

Screenshots go to ``$LANENB_ARTIFACTS/team`` (default extension/ui-tests/test-results/team).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from galata_run import run_spec
from test_lab_extension import CHROMIUM, EXTENSION

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from team_scenario import ALICE, kubeconfig_for, team_cluster

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
    pytest.mark.skipif(not (EXTENSION / "node_modules" / "@jupyterlab" / "galata").is_dir(),
                       reason="extension/node_modules is missing: run scripts/setup.sh (it runs jlpm install)"),
]


def test_the_team_section_opens_with_the_jobs_alice_may_read(tmp_path):
    with team_cluster() as thread:
        artifacts = run_spec("team.spec.ts", "team", tmp_path / "home", tmp_path / "root", LANENB_UI_TEAM="1",
                             LANENB_USER=ALICE, KUBECONFIG=str(kubeconfig_for(thread, tmp_path, ALICE)),
                             LANENB_TEAM_NAMESPACES="team-b")
    assert (artifacts / "team-sidebar.png").stat().st_size > 10_000
