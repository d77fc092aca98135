"""The JupyterLab extension in a real browser: runs the Galata/Playwright suite
(extension/ui-tests) against a real JupyterLab with the installed lanenb extensions, real
training jobs started from notebook cells, and real restic snapshots.

Screenshots go to ``$LANENB_ARTIFACTS`` (default extension/ui-tests/test-results), kept as CI
artefacts. Skipped only where Chromium or Node.js is missing; ``scripts/setup.sh`` installs
both (and the npm packages), so CI runs it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from mpi_env import MPI_ROOT_ENV

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "extension"
CHROMIUM = os.environ.get("LANENB_CHROMIUM", "/usr/bin/chromium")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
    pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed (scripts/setup.sh)"),
    pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (Open MPI) is not installed"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _why(output: str, artifacts: Path) -> str:
    """What a failed run saw beside Playwright's own report, for a CI log that keeps nothing
    else: the server's warnings and tracebacks, and the page as Playwright last read it."""
    server = [line for line in output.splitlines() if line.startswith("[WebServer]")
              and any(word in line for word in ("Traceback", "Error", "error", " W ", " E ", "lanenb"))]
    pages = [p.read_text(errors="replace")[:3000] for p in sorted(artifacts.glob("**/error-context.md"))]
    return ("\n--- server warnings (last 40) ---\n" + "\n".join(server[-40:])
            + "\n--- the page at the failure ---\n" + "\n".join(pages)[:6000])


def _jlpm() -> str:
    scripts = Path(sysconfig.get_path("scripts")) / "jlpm"
    return str(scripts) if scripts.exists() else (shutil.which("jlpm") or "jlpm")


def test_sidebar_jobs_panel_stop_and_restore_in_chromium(tmp_path):
    assert (EXTENSION / "node_modules" / "@jupyterlab" / "galata").is_dir(), \
        "extension/node_modules is missing: run scripts/setup.sh (it runs jlpm install)"
    root = tmp_path / "root"
    root.mkdir()
    data = tmp_path / "synth"
    subprocess.run([sys.executable, "-m", "lanenb", "data", "synth", "--out", str(data), "--frames", "8",
                    "--seed", "0"], check=True, capture_output=True)
    artifacts = Path(os.environ.get("LANENB_ARTIFACTS") or EXTENSION / "ui-tests" / "test-results")
    artifacts.mkdir(parents=True, exist_ok=True)
    for old in artifacts.glob("*.png"):
        old.unlink()
    env = dict(os.environ, LANENB_HOME=str(tmp_path / "home"), LANENB_UI_DATA=str(data),
               LANENB_UI_PORT=str(_free_port()), LANENB_ARTIFACTS=str(artifacts),
               JUPYTERLAB_GALATA_ROOT_DIR=str(root), LANENB_CHROMIUM=CHROMIUM,
               PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1", CI="1", **MPI_ROOT_ENV)
    result = subprocess.run([_jlpm(), "playwright", "test", "--config", "ui-tests/playwright.config.js"],
                            cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=900)
    (artifacts / "playwright.log").write_text(result.stdout + result.stderr)
    report = "\n".join(line for line in result.stdout.splitlines() if not line.startswith("[WebServer]"))
    assert result.returncode == 0, report[-6000:] + _why(result.stdout + result.stderr, artifacts)
    restored = root / "restored-ui-run"
    assert restored.is_dir() and any(restored.iterdir()), "the sidebar's Restore left no directory"
    for shot in ("notebook-view.png", "job-panel-hover.png", "job-panel-toggle.png", "job-panel.png",
                 "job-panel-dark.png", "job-panel-running.png", "stop-dialog.png", "sidebar.png", "snapshot-diff.png",
                 "restored.png"):
        assert (artifacts / shot).stat().st_size > 10_000, shot
