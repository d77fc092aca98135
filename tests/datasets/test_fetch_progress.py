"""Plain progress lines for logs read later (the cluster fetch pod's log): first and last line of
each step always, others at most every ``interval`` seconds; rate and ETA from this run's bytes."""

from __future__ import annotations

import io

import pytest

from lanenb_trainer.datasets.progress import LineProgress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_are_throttled_and_carry_bytes_rate_and_eta():
    out, clock = io.StringIO(), Clock()
    progress = LineProgress(5.0, out, clock)
    progress("download", "train_set.zip", 0, 4 * 2**20)
    for _ in range(4):  # 4 updates within 3 s: none written
        clock.now += 0.75
        progress("download", "train_set.zip", int((clock.now - 100) * 2**20 / 3), 4 * 2**20)
    clock.now = 106.0
    progress("download", "train_set.zip", 2 * 2**20, 4 * 2**20)
    clock.now = 107.0
    progress("download", "train_set.zip", 4 * 2**20, 4 * 2**20)
    progress("download", "train_set.zip", 4 * 2**20, 4 * 2**20)  # a repeated end: no second last line
    assert out.getvalue().splitlines() == [
        "download train_set.zip: 0 B / 4.0 MiB (0%)",
        "download train_set.zip: 2.0 MiB / 4.0 MiB (50%), 341.3 KiB/s, ETA 0:00:06",
        "download train_set.zip: 4.0 MiB / 4.0 MiB (100%), 585.1 KiB/s",
    ]


def test_a_resumed_download_counts_only_this_runs_bytes_and_each_step_has_its_own_lines():
    out, clock = io.StringIO(), Clock()
    progress = LineProgress(0, out, clock)
    progress("download", "a.zip", 3 * 2**20, 4 * 2**20)  # resumed at 3 MiB
    clock.now += 2
    progress("download", "a.zip", 4 * 2**20, 4 * 2**20)
    progress("verify", "a.zip", 0, None)  # unknown total: bytes only
    assert out.getvalue().splitlines() == [
        "download a.zip: 3.0 MiB / 4.0 MiB (75%)",
        "download a.zip: 4.0 MiB / 4.0 MiB (100%), 512.0 KiB/s",
        "verify a.zip: 0 B",
    ]


def test_a_negative_interval_is_refused():
    with pytest.raises(ValueError, match=r"interval=-1"):
        LineProgress(-1)
