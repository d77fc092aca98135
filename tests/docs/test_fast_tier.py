"""The fast tier the docs tell a contributor to run on every change (``bash scripts/test-fast.sh``):
what it selects is checked by collecting it in a child pytest, never by running it.

- at least 1,000 tests are selected (the tier is worth running);
- no selected test asks for a process-starting fixture or carries a slow marker (the tier stays
  fast as tests are added: a new test that starts processes through a listed fixture leaves it);
- every listed fixture exists (a renamed fixture would silently let its tests back in);
- the script runs exactly that selection, and README and the development page show it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fast_tier import FAST_EXPRESSION, PROCESS_FIXTURES, PROCESS_MARKER, PROCESS_PATHS, SLOW_MARKERS

ROOT = Path(__file__).resolve().parents[2]

# collecting the whole suite in a child pytest takes ~20 s on 2 cores: the test is not fast itself
pytestmark = pytest.mark.slow

# a pytest plugin for the child: what -m selected and deselected, with fixtures and markers
DUMP_PLUGIN = textwrap.dedent(
    """
    import json, os

    _deselected = []

    def pytest_deselected(items):
        _deselected.extend(items)

    def _row(item):
        return {"id": item.nodeid, "fixtures": sorted(getattr(item, "fixturenames", ())),
                "markers": sorted({m.name for m in item.iter_markers()})}

    def pytest_collection_finish(session):
        with open(os.environ["FAST_TIER_DUMP"], "w") as fh:
            json.dump({"selected": [_row(i) for i in session.items],
                       "deselected": [_row(i) for i in _deselected]}, fh)
    """
)


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    where = tmp_path_factory.mktemp("fast-tier")
    (where / "fast_tier_dump.py").write_text(DUMP_PLUGIN)
    dump = where / "tier.json"
    env = {**os.environ, "FAST_TIER_DUMP": str(dump),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(where), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-p", "fast_tier_dump", "-m", FAST_EXPRESSION], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(dump.read_text())


def test_the_fast_tier_selects_at_least_a_thousand_tests(tier):
    assert len(tier["selected"]) >= 1000, len(tier["selected"])


def test_no_selected_test_starts_processes(tier):
    for row in tier["selected"]:
        assert not PROCESS_FIXTURES.intersection(row["fixtures"]), row
        assert not (SLOW_MARKERS | {PROCESS_MARKER}).intersection(row["markers"]), row
        assert not row["id"].startswith(PROCESS_PATHS), row


def test_what_is_left_out_is_marked_for_a_reason(tier):
    left_out = tier["deselected"]
    assert left_out, "nothing deselected: the process marker is not applied"
    for row in left_out:
        assert PROCESS_MARKER in row["markers"], row
        assert (PROCESS_FIXTURES.intersection(row["fixtures"]) or SLOW_MARKERS.intersection(row["markers"])
                or row["id"].startswith(PROCESS_PATHS)), row
    # every listed fixture and path names something real: a rename would let its tests back in
    used = {name for row in left_out for name in row["fixtures"]}
    assert used >= PROCESS_FIXTURES, sorted(PROCESS_FIXTURES - used)
    for path in PROCESS_PATHS:
        assert any(row["id"].startswith(path) for row in left_out), path


def test_the_script_runs_that_selection_and_the_docs_show_it():
    script = (ROOT / "scripts" / "test-fast.sh").read_text()
    assert f'-m "{FAST_EXPRESSION}"' in script
    for page in (ROOT / "README.md", ROOT / "docs" / "development" / "index.md"):
        assert "bash scripts/test-fast.sh" in page.read_text(), page
