"""The one reducer (RunState) and its bounded series: figures come from the events alone."""

from __future__ import annotations

import tracemalloc

import pytest

from lanenb.analysis.runstate import RunState
from lanenb.analysis.series import BucketSeries
from lanenb.contract.backend import LogLine
from lanenb_trainer.events import format_event, parse_line


def ev(kind: str, rank: int = 0, t: float = 0.0, **fields):
    e = parse_line(format_event(kind, rank, **fields))
    return type(e)(kind=e.kind, rank=e.rank, t=t, v=e.v, data=e.data)


def test_series_keeps_every_sample_until_capacity_then_merges_pairs():
    s = BucketSeries(capacity=8)
    for i in range(8):
        s.append(i, float(i))
    assert s.x == [float(i) for i in range(8)] and s.width == 1
    s.append(8, 8.0)
    assert s.width == 2 and len(s) == 5
    assert s.y[:4] == [0.5, 2.5, 4.5, 6.5] and s.ymin[0] == 0.0 and s.ymax[0] == 1.0
    assert s.count == 9


def test_series_stays_bounded_and_keeps_spikes_and_the_mean():
    s = BucketSeries(capacity=64)
    n = 100_000
    for i in range(n):
        s.append(i, 1000.0 if i == 77_777 else 1.0)
    assert 32 <= len(s) <= 64
    assert max(s.ymax) == 1000.0  # a spike survives downsampling in the min/max band
    total = sum(m * w for m, w in zip(s.y, [s.width] * len(s)))
    assert s.count == n and abs(total - (n - 1 + 1000.0)) < s.width * 1000  # means weighted by width


def test_series_skips_non_finite_values():
    s = BucketSeries(capacity=4)
    for y in (1.0, None, float("nan"), float("inf"), 2.0):
        s.append(0, y)
    assert s.count == 2 and s.nonfinite == 3


@pytest.mark.parametrize("capacity", [0, 3, 5, "8"])
def test_series_rejects_bad_capacity(capacity):
    with pytest.raises(ValueError, match=f"capacity={capacity!r}: must be an even integer >= 4"):
        BucketSeries(capacity=capacity)


def test_reducer_folds_progress_eta_metrics_and_ranks_from_event_times():
    st = RunState()
    st.fold(ev("start", 0, t=100.0, world_size=2, engine="ddp", device="cpu", total_steps=100,
               steps_per_epoch=50, config={"batch_size": 4, "epochs": 2}))
    st.fold(ev("step", 0, t=110.0, step=10, epoch=0, total_steps=100, loss=1.5, lr=0.01, images_per_s=40.0))
    st.fold(ev("step", 0, t=120.0, step=20, epoch=0, total_steps=100, loss=1.0, lr=0.01, images_per_s=42.0))
    st.fold(ev("system", 1, t=121.0, cpu_percent=90.0, rss_mb=400.0))
    st.fold(ev("system", 0, t=121.0, cpu_percent=95.0, rss_mb=410.0, gpu_util=80, gpu_mem_mb=5000,
               gpu_mem_total_mb=16000))
    st.fold(ev("epoch", 0, t=122.0, epoch=0, val_accuracy=0.8, val_fp=0.1, val_fn=0.2, train_loss=1.2))
    assert st.progress == 0.2
    assert st.rate == pytest.approx(1.0)  # 10 steps in 10 s of event time
    assert st.eta_s == pytest.approx(80.0)
    assert st.global_batch == 8
    assert st.accuracy() == 0.8
    assert st.series["loss"].y == [1.5, 1.0]
    assert st.system[0]["gpu_util"].y == [80.0] and st.system_last[1]["rss_mb"] == 400.0
    assert "step 20/100" in st.summary() and "ETA 1m 20s" in st.summary()
    st.fold(ev("eval", 0, t=130.0, split="test", accuracy=0.93, fp=0.02, fn=0.03, frames=10))
    st.fold(ev("end", 0, t=131.0, status="completed", step=100, duration_s=31.0))
    assert st.accuracy() == 0.93 and st.end_status == "completed" and st.step == 100


def test_reducer_keeps_errors_and_a_bounded_log():
    st = RunState(max_log_lines=5)
    for i in range(20):
        st.fold_line(LogLine(i % 2, f"line {i}"))
    st.fold_line(LogLine(1, "x", event=ev("error", 1, type="RuntimeError", message="loss is NaN")))
    assert len(st.logs) == 5 and st.lines_seen == 21
    assert st.errors[0]["rank"] == 1 and st.errors[0]["message"] == "loss is NaN"
    assert [e.error for e in st.log_tail(5)][-1] is True
    assert [e.text for e in st.log_tail(10, rank=1)] == ["line 17", "line 19", "ERROR RuntimeError: loss is NaN"]


def test_log_pane_lines_keep_their_event_and_mark_errors():
    """The pane keeps ``LogLine``s: plain lines as they came, events in the console's words."""
    st = RunState()
    plain = LogLine(None, "Traceback (most recent call last):", stream="mpirun")
    st.fold_line(plain)
    st.fold_line(LogLine(0, format_event("step", 0, step=3, total_steps=9, loss=0.25), stream="stdout"))
    st.fold_line(LogLine(0, "@lanenb {garbled"))
    kept = st.log_tail(3)
    assert kept[0] is plain and kept[0].error  # a traceback line is highlighted
    assert kept[1].text.startswith("epoch ? step 3/9 loss 0.2500") and kept[1].event.kind == "step"
    assert not kept[1].error and not kept[2].error and kept[2].event is None
    assert st.step == 3 and st.events_seen == 1 and st.lines_seen == 3


def test_reducer_memory_is_bounded_after_100k_steps_and_1m_lines():
    st = RunState(max_points=512, max_log_lines=2000)
    tracemalloc.start()
    for i in range(1, 100_001):
        st.fold(ev("step", 0, t=float(i), step=i, total_steps=10**6, loss=1.0 / i, lr=0.01, images_per_s=50.0))
    for i in range(1_000_000):
        st.fold_line(LogLine(i % 4, "x"))
    current, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(st.series["loss"]) <= 512 and len(st.logs) == 2000
    assert current < 5 * 2**20, f"{current / 2**20:.1f} MiB kept"
