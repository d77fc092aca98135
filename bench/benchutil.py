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
