"""bench/scnn_message_passing.py's issue-35 report: both shapes, and ``--isa avx2`` re-running
itself with every library limited to AVX2 (torch reads its ISA once, at import)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench_scripts import BENCH


def test_default_shapes_are_the_quickstarts_and_vgg16s(mp_bench) -> None:
    assert sorted(mp_bench.SHAPES.values()) == [[4, 128, 16, 40], [4, 128, 36, 100]]


def test_relu_flips_counts_every_relu_input_of_the_four_sweeps(mp_bench) -> None:
    """[1, 4, 3, 5]: the vertical sweeps convolve 2 slices of 5 rows each, the horizontal ones
    4 slices of 3, 4 channels: 2 * 2 * 5 * 4 + 2 * 4 * 3 * 4 = 176 relu inputs."""
    flipped, total = mp_bench.relu_flips([1, 4, 3, 5], 9, 0, "direct")
    assert total == 176 and 0 <= flipped <= total
    assert mp_bench.message_passing._sweep_forward.__name__ == "_sweep_forward"  # unwrapped again


def test_isa_reexec_only_when_the_environment_differs(mp_bench) -> None:
    env = {"PATH": "/bin"}
    argv = mp_bench.isa_reexec_argv("avx2", ["--isa", "avx2"], env)
    assert argv is not None and argv[0] == sys.executable and argv[2:] == ["--isa", "avx2"]
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert mp_bench.isa_reexec_argv("avx2", ["--isa", "avx2"], env) is None  # already set: run here
    assert mp_bench.isa_reexec_argv(None, [], {}) is None


def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not _has_avx2(), reason="needs a CPU with AVX2")
def test_isa_avx2_runs_with_torch_on_avx2_and_prints_it() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    env["PYTHONPATH"] = os.pathsep.join([str(BENCH.parent / "trainer"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, str(BENCH / "scnn_message_passing.py"), "--isa", "avx2", "--shape", "1", "4", "3", "5",
         "--repeats", "1", "--threads", "1"],
        env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "torch ISA AVX2 (limited by" in proc.stdout
    assert "equality (<= 1e-4 relative): OK" in proc.stdout
    assert "summary, baseline/ours fwd+bwd float32" in proc.stdout and "[ISA AVX2, 1 threads]" in proc.stdout
