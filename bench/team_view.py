"""The team view at scale, against the test API emulator (kmock over real HTTP).

    python bench/team_view.py [--jobs 500] [--namespaces 10] [--refreshes 50]

A third of the jobs run (2 GPU workers and a launcher each), the rest wait for GPUs; 16 nodes
of 8 GPUs (``tests/k8s/team_scenario.py: build_many``). Two scopes: the whole cluster (one list
and one watch per resource) and ``--namespaces`` namespaces named one by one (a user without
cluster-wide read: a list and a watch per resource and namespace).

Figures printed, with the CPU they were measured on:
- start: the lists (and the first progress pass over the running launchers' logs), wall time;
- first draw: start + the first ``view()`` + its table as text and HTML (goal: < 1 s);
- refresh: one ``view()`` + its ``to_dict()`` (what the sidebar's request costs), CPU time of
  the calling thread, p50/p95 (goal: < 50 ms), and the API requests a refresh sent (goal: 0);
- load: ``--distinct`` requests (default 1,000) each naming another namespace list, as a client
  with read permission could send the server's team route: the threads and API watches the
  process holds afterwards (goal: bounded by ``MAX_SHARED`` collectors, whatever the count).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "k8s"))

from k8s_harness import start_emulator  # noqa: E402
from kube_emulator import QUOTAS  # noqa: E402
from team_scenario import build_many  # noqa: E402

from lanenb.kube.client import load_clients  # noqa: E402
from lanenb.team import _SHARED, MAX_SHARED, close_shared, shared_collector  # noqa: E402
from lanenb.team.collector import TeamCollector  # noqa: E402


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def measure(label: str, collector: TeamCollector, refreshes: int, served: list) -> None:
    first_request = len(served)
    t0 = time.perf_counter()
    collector.start(watch=True)
    started = time.perf_counter() - t0
    reads = sum(1 for _, path in served[first_request:] if "/log" in path)
    view = collector.view()
    text, html = view.text(), view.table().html()
    first = time.perf_counter() - t0
    before = len(served)
    cpu = []
    for _ in range(refreshes):
        c0 = time.thread_time()
        collector.view().to_dict()
        cpu.append(time.thread_time() - c0)
    # the background progress loop's log reads are not a refresh's requests
    sent = sum(1 for _, path in served[before:] if "/log" not in path)
    logs = len(served) - before - sent
    ms = [c * 1000 for c in cpu]
    print(f"{label}: {len(view.jobs)} jobs, {len(collector.informers)} list+watch streams")
    print(f"  start (lists + first progress pass)  {started * 1000:8.1f} ms wall  ({reads} launcher logs read)")
    print(f"  first draw (start + view + table)    {first * 1000:8.1f} ms wall  "
          f"({len(text.splitlines())} text lines, {len(html) // 1024} KiB HTML)")
    print(f"  refresh (view + to_dict), CPU        p50={pct(ms, 50):6.1f} ms  p95={pct(ms, 95):6.1f} ms  "
          f"mean={statistics.fmean(ms):6.1f} ms  (n={refreshes})")
    print(f"  API requests sent by {refreshes} refreshes: {sent} (launcher-log reads of the background "
          f"progress loop meanwhile: {logs})")


def load(kubeconfig: str, distinct: int, namespaces: int) -> None:
    """``distinct`` team views, each of another namespace list, through the server's shared
    collectors: what the process holds afterwards."""
    before = threading.active_count()
    peak = before
    t0 = time.perf_counter()
    for i in range(distinct):
        shared_collector(kubeconfig=kubeconfig, namespaces=[f"team-{i % namespaces}", f"probe-{i}"]).view()
        peak = max(peak, threading.active_count())
    wall = time.perf_counter() - t0
    watches = sum(len(c.informers) for c in _SHARED.values())
    print(f"load: {distinct} distinct namespace lists in {wall:.1f} s; held afterwards: {len(_SHARED)} collectors "
          f"(MAX_SHARED={MAX_SHARED}), {watches} list+watch streams, threads {before} -> "
          f"{threading.active_count()} (peak {peak})")
    close_shared()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500, help="MPIJobs (default 500)")
    parser.add_argument("--namespaces", type=int, default=10, help="namespaces they are spread over (default 10)")
    parser.add_argument("--refreshes", type=int, default=50, help="view() calls timed (default 50)")
    parser.add_argument("--distinct", type=int, default=1000,
                        help="team views of distinct namespace lists for the load figure (default 1000; 0: none)")
    args = parser.parse_args()
    if args.jobs < 1 or args.namespaces < 1 or args.refreshes < 1 or args.distinct < 0:
        parser.error("--jobs, --namespaces and --refreshes must be >= 1, --distinct >= 0")
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; Python {platform.python_version()}")
    thread = start_emulator()
    thread.emulator.install(QUOTAS)
    thread.start()
    try:
        build_many(thread, args.jobs, args.namespaces)
        with tempfile.TemporaryDirectory() as tmp:
            clients = load_clients(kubeconfig=str(thread.write_kubeconfig(Path(tmp) / "kubeconfig")))
            clients.core.list_node()  # the client's one-off first-call cost, not the view's
            served = thread.emulator.served
            cluster = TeamCollector(clients, user="user-0")
            measure("cluster scope", cluster, args.refreshes, served)
            cluster.close()
            names = [f"team-{i}" for i in range(args.namespaces)]
            per_ns = TeamCollector(clients, names, user="user-0")
            measure(f"{args.namespaces} namespaces named", per_ns, args.refreshes, served)
            per_ns.close()
            if args.distinct:
                load(str(Path(tmp) / "kubeconfig"), args.distinct, args.namespaces)
    finally:
        thread.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
