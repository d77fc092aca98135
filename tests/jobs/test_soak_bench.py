"""bench/soak.py at CI's size: seeded faults on real local jobs (kills, cancels, suspend/resume
races, same-name submits); every state truthful, no process left, no record lost (issue 51)."""

from __future__ import annotations

import pytest
from bench_scripts import load_bench

pytestmark = pytest.mark.slow


def test_a_small_seeded_soak_finds_no_untruthful_state_no_process_left_and_no_record_lost():
    soak = load_bench("soak")
    tallies, lost = soak.soak(7, seed=1)
    text = soak.table(tallies, lost)
    assert set(tallies) == set(soak.KINDS), text  # every kind of fault drawn at least once
    assert sum(t.untruthful for t in tallies.values()) == 0, text
    assert sum(t.left for t in tallies.values()) == 0, text
    assert lost == 0, text
