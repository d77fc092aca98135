"""The run doctor on simulated hosts (shared by test_doctor_exchange.py and bench/doctor_delay.py):
a cluster's launcher output folded into a ``RunState`` as the Kubernetes backend's log reader
would fold it, and the exchange-bound fault: every host's link rate-limited by tc htb
(``SimCluster.shape``) while the run trains."""

from __future__ import annotations

import sys
from pathlib import Path

from cluster_support import SimCluster, _netns_list
from multihost_support import cluster_for, make_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "doctor"))
from doctor_support import VERDICT_DEADLINE_S, FaultOutcome, VerdictWatch, watch_fault

from lanenb.analysis.runstate import RunState
from lanenb_trainer.events import Event

# The small model's gradients are ~3 MB a step; at 50 Mbit/s a 2-rank ring all-reduce takes
# ~0.5 s, several times the tiny step's compute, while the collective timeout (10 s) is far away.
EXCHANGE_RATE = "50mbit"
__all__ = ["EXCHANGE_RATE", "VERDICT_DEADLINE_S", "cluster_feed", "exchange_bound_run"]


def cluster_feed(cluster: SimCluster):
    """The launcher's tagged lines (parsed by the cluster's pump thread) as a watcher feed."""
    seen = 0

    def feed(state: RunState) -> tuple[list[Event], bool]:
        nonlocal seen
        proc = cluster.launcher.proc
        final = proc is not None and proc.poll() is not None
        lines = cluster.lines[seen:]
        seen += len(lines)
        for line in lines:
            state.fold_line(line)
        return [ln.event for ln in lines if ln.event is not None], final

    return feed


def exchange_bound_run(volume: Path, work: Path, *, rate: str = EXCHANGE_RATE
                       ) -> tuple[FaultOutcome, str, list[str]]:
    """2 ranks on 2 simulated hosts (ddp); once past start-up every host's egress is limited to
    ``rate``. Returns the outcome, what ``shape`` applied and the namespaces of this cluster still
    there after its teardown (none expected; other sessions' clusters are not counted)."""
    spec = make_spec(volume, "ddp", 2, 1, run=work.name, epochs=200)
    cluster = cluster_for(spec, work / "cluster")
    applied = ""
    try:
        cluster.start()
        cluster.start_launcher()

        def switch_on() -> None:
            nonlocal applied
            applied = cluster.shape(rate)

        outcome = watch_fault(VerdictWatch(cluster_feed(cluster)), 2, switch_on,
                              lambda v: v.kind == "exchange-bound")
        outcome.log_tail = cluster.output(4000)
    finally:
        cluster.close()
    return outcome, applied, [ns for ns in _netns_list() if ns.startswith(cluster.prefix)]
