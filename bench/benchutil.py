"""What every bench prints beside its figures: the machine (figures differ between CPUs)."""

from __future__ import annotations

import platform


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (or the platform's processor string)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_label() -> str:
    """The CPU model and the SIMD level torch's kernels use on it (e.g. AVX2, AVX512): ratios
    measured on one ISA do not carry over to another."""
    import torch

    return f"{cpu_name()}, torch ISA {torch.backends.cpu.get_cpu_capability()}"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile, ``q`` in 0..1."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def add_run_arguments(ap, rounds: int, steps: int) -> None:
    """The flags of an A/B training bench (one setting on, one off, in interleaved rounds):
    ranks, rounds, steps, warm-up, image size, batch and torch threads per rank."""
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=rounds, help="interleaved rounds (each: one run per setting)")
    ap.add_argument("--steps", type=int, default=steps, help="steps per run")
    ap.add_argument("--warmup", type=int, default=5, help="first steps left out of each run's median")
    ap.add_argument("--height", type=int, default=128)
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank (LANENB_THREADS)")


def paired_overhead(on: list[float], off: list[float]) -> tuple[float, float, float, float]:
    """An A/B bench's verdict from interleaved rounds: the medians of both settings, the overhead
    in % (median of each round's on/off ratio: the two runs of a round ran back to back, so
    slow drifts of the machine's load cancel) and the ratios' spread in % (what the measure can
    resolve)."""
    import statistics

    ratios = [a / b for a, b in zip(on, off)]
    return (statistics.median(on), statistics.median(off), (statistics.median(ratios) - 1) * 100,
            (max(ratios) - min(ratios)) / 2 * 100)
