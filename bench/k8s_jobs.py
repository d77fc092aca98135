"""Kubernetes backend latencies against the test API emulator (kmock over real HTTP).

    python bench/k8s_jobs.py [--jobs 10] [--lines 200] [--interval 0.01]

Figures printed:
- submit() return time (control back to the notebook),
- submit -> Created condition seen through the watch (the fake operator sets it at once, so
  this is the client + HTTP + watch overhead, not a real operator's reconcile delay),
- log follow latency: a launcher prints timestamped lines; latency = receive time - print time
  (goal: p95 < 0.5 s),
- the kubernetes client's one-off first-call cost (pydantic validator build), excluded above.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "k8s"))

from fake_operator import FakeCluster  # noqa: E402
from k8s_harness import start_emulator, warm_up  # noqa: E402

from lanenb.backends.kubernetes.backend import KubernetesBackend  # noqa: E402
from lanenb.contract.spec import TrainSpec  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def show(label: str, values: list[float]) -> None:
    ms = [v * 1000 for v in values]
    print(f"{label:<34} n={len(ms):<4} p50={pct(ms, 50):8.1f} ms  p95={pct(ms, 95):8.1f} ms  "
          f"max={max(ms):8.1f} ms  mean={statistics.fmean(ms):8.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10, help="MPIJobs to submit (default 10)")
    parser.add_argument("--lines", type=int, default=200, help="log lines to follow (default 200)")
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between log lines (default 0.01)")
    args = parser.parse_args()
    if args.jobs < 1 or args.lines < 1 or args.interval < 0:
        parser.error("--jobs and --lines must be >= 1, --interval >= 0")

    thread = start_emulator()
    fake = FakeCluster(thread.emulator).attach()
    thread.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            backend = KubernetesBackend(kubeconfig=thread.write_kubeconfig(Path(tmp) / "kubeconfig"))
            t0 = time.perf_counter()
            warm_up(backend)
            first_call = time.perf_counter() - t0

            fake.rewrite_argv = lambda argv: [sys.executable, "-c", "pass"]
            submit_s, created_s = [], []
            for i in range(args.jobs):
                spec = TrainSpec(dataset="/d", backend="kubernetes", image="img:1", name=f"bench-{i}")
                t0 = time.perf_counter()
                handle = backend.submit(spec)
                submit_s.append(time.perf_counter() - t0)
                for _kind, obj in _watch(backend, spec, handle):
                    conds = {c["type"] for c in (obj or {}).get("status", {}).get("conditions", [])}
                    if "Created" in conds:
                        created_s.append(time.perf_counter() - t0)
                        break

            code = ("import time\n"
                    f"for i in range({args.lines}):\n"
                    "    print(f'[1,0]<stdout>:{time.time():.6f} {i}', flush=True)\n"
                    f"    time.sleep({args.interval})\n")
            fake.rewrite_argv = lambda argv: [sys.executable, "-c", code]
            spec = TrainSpec(dataset="/d", backend="kubernetes", image="img:1", name="bench-logs")
            handle = backend.submit(spec)
            follow_s = []
            for line in backend.logs(spec, handle, follow=True):
                now = time.time()
                sent = float(line.text.split()[0])
                follow_s.append(now - sent)
    finally:
        thread.stop()

    print(f"kubernetes backend vs kmock emulator ({args.jobs} jobs, {args.lines} log lines every {args.interval}s)")
    print(f"{'client first-call warm-up (once)':<34} {first_call * 1000:8.1f} ms")
    show("submit() returns", submit_s)
    show("submit -> Created seen (watch)", created_s)
    show("log follow latency", follow_s)
    ok = pct(follow_s, 95) < 0.5
    print(f"goal log-follow p95 < 500 ms: {'met' if ok else 'NOT met'}; lines received {len(follow_s)}/{args.lines}")
    return 0


def _watch(backend: KubernetesBackend, spec: TrainSpec, handle: dict):
    from lanenb.kube.watch import watch_mpijob

    return watch_mpijob(backend.clients(), handle["namespace"], handle["name"], timeout=30)


if __name__ == "__main__":
    sys.exit(main())
