"""The sidebar's Team section in a real browser: the emulated cluster of
``tests/k8s/team_scenario.py`` runs in this process (several users' jobs, a GPU-starved one, a
quota, RBAC), the Jupyter server reaches it as alice (read and stop in team-a only, through
``KUBECONFIG``), and the Galata spec extension/ui-tests/tests/team.spec.ts opens the section.

Screenshots go to ``$LANENB_ARTIFACTS/team`` (default extension/ui-tests/test-results/team).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_lab_extension import CHROMIUM, EXTENSION, _free_port, _jlpm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from k8s_harness import start_emulator
from kube_emulator import QUOTAS
from team_scenario import ALICE, build_team, enable_rbac, kubeconfig_for

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
    pytest.mark.skipif(not (EXTENSION / "node_modules" / "@jupyterlab" / "galata").is_dir(),
                       reason="extension/node_modules is missing: run scripts/setup.sh (it runs jlpm install)"),
]


def test_the_team_section_opens_with_the_jobs_alice_may_read(tmp_path):
    thread = start_emulator()
    thread.emulator.install(QUOTAS)
    thread.start()
    try:
        build_team(thread)
        enable_rbac(thread)
        root = tmp_path / "root"
        root.mkdir()
        artifacts = Path(os.environ.get("LANENB_ARTIFACTS") or EXTENSION / "ui-tests" / "test-results") / "team"
        artifacts.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, LANENB_HOME=str(tmp_path / "home"), LANENB_UI_TEAM="1", LANENB_USER=ALICE,
                   KUBECONFIG=str(kubeconfig_for(thread, tmp_path, ALICE)),
                   LANENB_TEAM_NAMESPACES="team-b", LANENB_UI_PORT=str(_free_port()),
                   LANENB_ARTIFACTS=str(artifacts), JUPYTERLAB_GALATA_ROOT_DIR=str(root), LANENB_CHROMIUM=CHROMIUM,
                   PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1", CI="1")
        result = subprocess.run([_jlpm(), "playwright", "test", "--config", "ui-tests/playwright.config.js",
                                 "team.spec.ts"], cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=300)
    finally:
        thread.stop()
    (artifacts / "playwright.log").write_text(result.stdout + result.stderr)
    report = "\n".join(line for line in result.stdout.splitlines() if not line.startswith("[WebServer]"))
    assert result.returncode == 0, report[-8000:]
    assert "1 passed" in result.stdout, report[-8000:]  # ran, not skipped
    assert (artifacts / "team-sidebar.png").stat().st_size > 10_000
