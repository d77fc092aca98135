"""Every training command the README and the guide show, run as a new user runs it, on the
synthetic data the guide says how to make; each must reach the test accuracy its page promises.

A new user's first command used to train to test accuracy 0.00-0.37 (a 50-step warm-up longer
than the whole run), and nothing noticed: the pages promised nothing and no test ran them.
The commands are found on the pages (fenced blocks and the README's inline example), not copied
here, so a page that changes a command changes what runs.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from mpi_env import MPI_ROOT_ENV

from lanenb.analysis.headline import from_metrics
from lanenb.jobs import get_job, list_jobs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
TRAINS = re.compile(r"%%?lanetrain\b|\blanenb train\b|\bsubmit\(TrainSpec\(")
SYNTH = re.compile(r"data/synth(?![\w-])")  # the guide's 200 frames, not data/synth500
CLAIM = re.compile(r"test accuracy (0\.\d+) or more")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`(%lanetrain [^`]+)`")
MAKE_DATA = "lanenb data synth --out data/synth"


@dataclass(frozen=True)
class Command:
    page: str
    kind: str  # bash | python | inline
    code: str
    claim: float

    def __str__(self) -> str:
        return f"{self.page}: {self.code.splitlines()[0][:60]}"


def documented() -> list[Command]:
    """The pages' training commands on ``data/synth``, each with the accuracy the text after it
    promises ("test accuracy 0.8 or more"); a command without a promise fails here."""
    found: list[Command] = []
    for page in PAGES:
        text = page.read_text()
        spans = [(m.group(1) or "python", m.group(2), m.end()) for m in FENCE.finditer(text)]
        if page.name == "README.md":
            spans += [("inline", m.group(1), m.end()) for m in INLINE.finditer(text)]
        for lang, code, end in spans:
            if not (TRAINS.search(code) and SYNTH.search(code)):
                continue
            claim = CLAIM.search(text, end, end + 900)
            assert claim, f"{page.name}: no 'test accuracy X or more' after {code.splitlines()[0]!r}"
            kind = "bash" if lang in ("bash", "sh", "console") else "inline" if lang == "inline" else "python"
            found.append(Command(page.relative_to(ROOT).as_posix(), kind, code, float(claim.group(1))))
    return found


COMMANDS = documented()


def test_the_pages_show_the_commands_this_test_runs():
    pages = {c.page for c in COMMANDS}
    assert {"README.md", "docs/guide/train.md", "docs/guide/jobs.md"} <= pages, pages
    assert [c.kind for c in COMMANDS if c.page == "docs/guide/train.md"] == ["python", "python", "bash"]
    assert MAKE_DATA in (ROOT / "docs" / "guide" / "train.md").read_text()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A new user's folder with ``data/synth`` made by the guide's own command."""
    where = tmp_path_factory.mktemp("newuser")
    proc = subprocess.run([sys.executable, "-m", "lanenb", *shlex.split(MAKE_DATA)[1:], "--quiet"], cwd=where,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return where


def _bash(code: str, cwd: Path) -> float:
    argv = shlex.split(code.replace("\\\n", " "))
    assert argv[:2] == ["lanenb", "train"], argv
    proc = subprocess.run([sys.executable, "-m", "lanenb", *argv[1:]], cwd=cwd, capture_output=True, text=True,
                          timeout=400, env={**os.environ, **MPI_ROOT_ENV})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    run_dir = cwd / argv[argv.index("--run-dir") + 1]
    import json

    found = from_metrics(json.loads((run_dir / "metrics.json").read_text()))
    assert found is not None
    return float(found.accuracy)


def _notebook(ip, code: str) -> float:
    before = {j.name for j in list_jobs()}
    ip.user_ns.pop("job", None)
    result = ip.run_cell(code)
    assert result.success, result.error_in_exec or result.error_before_exec
    job = ip.user_ns.get("job")
    if job is None:  # a cell magic that waited: the job it started
        (name,) = {j.name for j in list_jobs()} - before
        job = get_job(name)
    status = job.wait(timeout=400)
    assert status.state.value == "succeeded", (status, "\n".join(l.text for l in job.logs())[-3000:])
    found = from_metrics(job.metrics)
    assert found is not None
    return float(found.accuracy)


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_the_documented_command_learns_what_its_page_says(command, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("LANENB_THREADS", "1")
    if command.kind == "bash":
        accuracy = _bash(command.code, workdir)
    else:
        from ipshell import session_shell

        code = f"job = {command.code}" if command.kind == "inline" else command.code
        accuracy = _notebook(session_shell(), code)
    assert accuracy >= command.claim, f"{command}: test accuracy {accuracy:.4f} < {command.claim} (the page's)"
