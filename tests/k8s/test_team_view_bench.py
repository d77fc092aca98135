"""``bench/team_view.py`` (the figures in docs/guide/team.md) runs as the page says, and its load
figure shows what the server holds after many distinct namespace lists: MAX_SHARED collectors,
not one per request."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_team_view_bench_prints_its_figures_and_a_bounded_load():
    from lanenb.team import MAX_SHARED

    out = subprocess.run([sys.executable, str(ROOT / "bench" / "team_view.py"), "--jobs", "20", "--namespaces", "3",
                          "--refreshes", "3", "--distinct", "20"], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(r"^CPU: .+, \d+ cores", out.stdout, re.M)
    assert "cluster scope: 20 jobs" in out.stdout and "3 namespaces named: 20 jobs" in out.stdout
    load = re.search(r"load: 20 distinct namespace lists in [\d.]+ s; held afterwards: (\d+) collectors "
                     r"\(MAX_SHARED=(\d+)\), (\d+) list\+watch streams, threads (\d+) -> (\d+)", out.stdout)
    assert load, out.stdout
    collectors, cap, streams, before, after = map(int, load.groups())
    assert collectors == cap == MAX_SHARED < 20
    # what MAX_SHARED collectors hold (~11 threads, <= 2 namespaces x 5 streams each), not 20 collectors' worth
    assert 0 < streams <= collectors * 2 * 5 and after - before <= 15 * MAX_SHARED
