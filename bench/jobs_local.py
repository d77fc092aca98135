"""Local Job API latency: submit → control back, and submit → first ``step`` event.

    python bench/jobs_local.py                    # synthetic data, 2 ranks, tiny images
    python bench/jobs_local.py --data DIR --repeats 10

Goal: ``submit`` returns in < 0.5 s (the notebook cell must not block). Time to the first
step is dominated by each rank importing torch and starting up; the import is timed on its
own and subtracted, and the same ranks are also started with bare mpirun (no Job API) so the
Job layer's own overhead can be read off under the same load. Everything runs in a
throwaway LANENB_HOME.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def torch_import_seconds(repeats: int = 2) -> float:
    """Median cold-process ``import torch`` time (what every rank pays before its first step)."""
    code = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout) for _ in range(repeats)]
    return statistics.median(times)


def bare_mpirun_first_step(spec, run_dir: Path, timeout: float) -> float | None:
    """The same ranks started straight with mpirun (no Job API): the baseline the Job
    layer's overhead is measured against, under the same machine load."""
    from lanenb.launch.mpirun import iter_output, launch_env, start_local, stop

    t0 = time.perf_counter()
    proc = start_local(spec.processes, spec.trainer_args(str(run_dir)), env=launch_env())
    try:
        for line in iter_output(proc.stdout):
            if line.event is not None and line.event.kind == "step":
                return time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                return None
        return None
    finally:
        stop(proc, grace=5)


def make_data(out: Path, frames: int) -> Path:
    subprocess.run([sys.executable, "-m", "lanenb", "data", "synth", "--out", str(out), "--frames", str(frames),
                    "--seed", "0"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="dataset root (default: 16 synthetic frames)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="submits timed for the control-return figure")
    parser.add_argument("--engine", default="ddp")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the first step")
    args = parser.parse_args(argv)

    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    with tempfile.TemporaryDirectory(prefix="lanenb-bench-") as tmp:
        os.environ["LANENB_HOME"] = str(Path(tmp) / "home")
        from lanenb.jobs import TrainSpec, submit
        from lanenb_trainer.progress import progress_bar

        data = args.data or make_data(Path(tmp) / "synth", 16)
        spec_kw = dict(dataset=str(data), processes=args.processes, engine=args.engine, batch_size=2,
                       max_steps=20, use_val=False,
                       extra_args=["--img-height", "64", "--img-width", "128", "--log-every", "1"])

        # 1) submit -> control back (each job cancelled at once; cancel is not timed)
        returns = []
        for _ in progress_bar(range(args.repeats), desc="submit latency", unit="job"):
            t0 = time.perf_counter()
            job = submit(TrainSpec(**spec_kw))
            returns.append(time.perf_counter() - t0)
            job.cancel()
        print(f"\nLocal Job API, {args.processes} ranks, engine={args.engine}, {os.cpu_count()} CPU cores")
        print(f"submit -> control back      median {statistics.median(returns) * 1000:7.1f} ms   "
              f"max {max(returns) * 1000:7.1f} ms   (n={len(returns)}, goal < 500 ms)")

        # 2) submit -> first step event, followed live like a notebook would
        t_submit = time.time()
        t0 = time.perf_counter()
        job = submit(TrainSpec(**spec_kw))
        t_back = time.perf_counter() - t0
        first: dict[str, float] = {}
        for event in job.events(follow=True):
            first.setdefault(event.kind, time.perf_counter() - t0)
            if event.kind == "step":
                break
            if event.kind == "error":
                print(f"the trainer failed before its first step: {event.get('message')}", file=sys.stderr)
                job.cancel()
                return 1
            if time.perf_counter() - t0 > args.timeout:
                break
        job.cancel()
        bare = bare_mpirun_first_step(TrainSpec(**spec_kw), Path(tmp) / "bare-run", args.timeout)
        import_s = torch_import_seconds()

    print(f"submit -> control back      {t_back * 1000:7.1f} ms (the timed run)")
    for kind, seconds in first.items():
        print(f"submit -> first {kind:<12}{seconds:7.2f} s")
    if "step" in first:
        print(f"torch import (one process)  {import_s:7.2f} s")
        print(f"submit -> first step, torch import excluded  {first['step'] - import_s:7.2f} s")
        if bare is not None:
            print(f"bare mpirun -> first step (no Job API)       {bare:7.2f} s")
            print(f"Job API overhead on the first step           {first['step'] - bare:+7.2f} s")
    else:
        print(f"no step event within {args.timeout:g} s (submitted at {t_submit:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
