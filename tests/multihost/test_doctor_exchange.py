"""The run doctor across simulated hosts: a rate-limited link (tc htb on every host) turns a
2-host run exchange-bound, and the verdict says so within 30 s of the shaping."""

from __future__ import annotations

import pytest
from doctor_cluster import VERDICT_DEADLINE_S, exchange_bound_run

pytestmark = [pytest.mark.multihost, pytest.mark.slow, pytest.mark.usefixtures("machine")]


def test_rate_limited_link_is_named_exchange_bound(synth_volume, tmp_path):
    outcome, applied, left = exchange_bound_run(synth_volume, tmp_path)
    assert left == []  # the cluster's namespaces, veths and sshds are gone
    assert applied.startswith("rate "), applied
    assert outcome.before.kind != "exchange-bound", outcome.explain()
    assert outcome.hit is not None and outcome.delay_s is not None, f"{applied}\n{outcome.explain()}"
    assert outcome.delay_s <= VERDICT_DEADLINE_S, outcome.explain()
    verdict = outcome.hit.verdict
    line = str(verdict)
    assert line.startswith("exchange-bound: ") and "exchange" in verdict.message, line
    assert verdict.action, line  # what helps (larger per-rank batch, fewer and fuller nodes)
