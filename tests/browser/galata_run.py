"""Run one Galata spec of extension/ui-tests against a real JupyterLab over a test's
``LANENB_HOME``, in Debian's Chromium: what every short browser test of a sidebar section does."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from test_lab_extension import CHROMIUM, EXTENSION, _free_port, _jlpm

__all__ = ["run_spec"]


def run_spec(spec: str, folder: str, home: Path, root: Path, **env_vars: str) -> Path:
    """Run ``extension/ui-tests/tests/<spec>`` once and fail with its report unless it passed.

    Screenshots go to ``$LANENB_ARTIFACTS/<folder>`` (default extension/ui-tests/test-results):
    a folder of its own, since Playwright empties its output folder when it starts.

    Returns:
        The artifacts folder (the spec's screenshots, ``playwright.log``).
    """
    artifacts = Path(os.environ.get("LANENB_ARTIFACTS") or EXTENSION / "ui-tests" / "test-results") / folder
    artifacts.mkdir(parents=True, exist_ok=True)
    root.mkdir(exist_ok=True)
    env = dict(os.environ, LANENB_HOME=str(home), LANENB_UI_PORT=str(_free_port()), LANENB_ARTIFACTS=str(artifacts),
               JUPYTERLAB_GALATA_ROOT_DIR=str(root), LANENB_CHROMIUM=CHROMIUM, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1",
               CI="1", **env_vars)
    result = subprocess.run([_jlpm(), "playwright", "test", "--config", "ui-tests/playwright.config.js", spec],
                            cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=300)
    (artifacts / "playwright.log").write_text(result.stdout + result.stderr)
    report = "\n".join(line for line in result.stdout.splitlines() if not line.startswith("[WebServer]"))
    assert result.returncode == 0, report[-8000:]
    assert "1 passed" in result.stdout, report[-8000:]  # ran, not skipped
    return artifacts
