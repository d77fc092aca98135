"""How a sweep shows in a notebook: its trials table as HTML (``s.table()``, the live table of
``%lanesweep --wait``), and at the end the report in the live table's place, its chart below,
with no placeholder left above it. Sweeps recorded straight into their study
(``tests/support/sweep_studies.py``), the driver's liveness faked: nothing trains here."""

from __future__ import annotations

import pytest
from IPython.core.formatters import DisplayFormatter
from IPython.utils.capture import capture_output
from sweep_studies import Trial, record_sweep

from lanenb.sweeps import attach
from lanenb.sweeps.sweep import Sweep

TRIALS = [Trial({"lr": 0.01, "momentum": 0.9}, [0.5, 0.7]), Trial({"lr": 0.002, "momentum": 0.8}, [0.4])]


@pytest.fixture(scope="module")
def ip():
    from ipshell import session_shell

    return session_shell()


def test_a_sweeps_table_shows_as_html():
    record_sweep("shown", TRIALS)
    data, _ = DisplayFormatter().format(attach("shown").table())
    assert "<table>" in data["text/html"] and "sweep shown: finished, 2/2 trial(s)" in data["text/html"]
    assert data["text/plain"].startswith("sweep shown: finished, 2/2 trial(s)")


def test_lanesweep_wait_updates_its_table_in_place_and_leaves_the_report(ip, monkeypatch):
    record_sweep("live", TRIALS)
    alive = iter([object()] * 4)  # the driver answers "running" to the first four looks, then is gone
    monkeypatch.setattr(Sweep, "_driver", lambda self: next(alive, None))
    monkeypatch.setattr(Sweep, "wait", lambda self, timeout=None, poll=1.0: self.state)

    with capture_output(stdout=False, stderr=False) as shown:
        s = ip.run_line_magic("lanesweep", "--attach live --wait")
    assert s.state == "finished"

    outs = shown.outputs
    assert all("Table(columns" not in o.data.get("text/plain", "") for o in outs), [o.data for o in outs]
    first, *updates, chart = outs
    live_id = first.transient["display_id"]
    assert updates and all(o.update and o.transient["display_id"] == live_id for o in updates)
    assert "sweep live: running" in first.data["text/html"]
    for o in [first, *updates]:
        assert "<table>" in o.data["text/html"] and o.data["text/plain"].startswith("sweep live: ")
    final = updates[-1].data  # the report's table took the live table's place: no empty line above it
    assert final["text/plain"].startswith("sweep live: finished, 2/2 trial(s)")
    assert not chart.update and "application/vnd.vegalite.v5+json" in chart.data
    assert chart.data["text/plain"].startswith("<chart: sweep live: finished")
