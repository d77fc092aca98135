"""The ``timing`` event: where each step's time goes, per rank.

Unit tests drive :class:`StepTimer` with a fake clock (no sleeps); the engine tests check the
laps ``backward_step`` reports; the slow tests run 2 real ranks on each engine and check the
events they print.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
from trainer_support import dump, engines, events_of, run_ranks, train_args

from lanenb_trainer.config import ConfigError, TrainConfig, parse_config
from lanenb_trainer.training.timing import PHASES, NullTimer, StepTimer, make_step_timer

FIELDS = [f"{p}_s" for p in PHASES] + ["other_s"]


class FakeClock:
    """Host time that moves only when a test says so."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Recorder:
    """Stands in for the rank's ``EventLog``."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, kind: str, **fields: Any) -> None:
        assert kind == "timing"
        self.events.append(fields)


def make_timer(every: int = 2, **kw: Any) -> tuple[StepTimer, FakeClock, Recorder]:
    clock, out = FakeClock(), Recorder()
    return StepTimer(out, every=every, host="node-a", device="cpu", now=clock, **kw), clock, out


def run_step(timer: StepTimer, clock: FakeClock, step: int, *, data: float, h2d: float, compute: float,
             exchange: float, optimizer: float, other: float, launches: int = 1) -> None:
    """One step as the loop and DDP's backward_step lap it."""
    clock.advance(data)
    timer.lap_data()
    clock.advance(h2d)
    timer.lap("h2d")
    clock.advance(compute)
    for _ in range(launches):  # DDP notes every bucket; only the last launch splits
        timer.exchange_launched()
    clock.advance(exchange)
    timer.lap_split("compute", "exchange")
    clock.advance(optimizer)
    timer.lap("optimizer")
    clock.advance(other)
    timer.end_step(step)


def test_window_means_and_the_rest_as_other():
    timer, clock, out = make_timer(every=2)
    timer.begin()
    run_step(timer, clock, 1, data=0.1, h2d=0.02, compute=0.5, exchange=0.2, optimizer=0.04, other=0.01)
    assert out.events == []  # the window is not full yet
    run_step(timer, clock, 2, data=0.3, h2d=0.04, compute=0.7, exchange=0.0, optimizer=0.06, other=0.03,
             launches=3)
    [ev] = out.events
    assert (ev["step"], ev["steps"], ev["host"], ev["device"]) == (2, 2, "node-a", "cpu")
    expected = {"data_s": 0.2, "h2d_s": 0.03, "compute_s": 0.6, "exchange_s": 0.1, "optimizer_s": 0.05,
                "other_s": 0.02}
    assert {k: ev[k] for k in expected} == pytest.approx(expected, abs=1e-9)
    assert ev["step_s"] == pytest.approx(sum(expected.values()), abs=1e-9)
    assert (ev["pause_s"], ev["pause"]) == (0.0, [])


def test_windows_follow_the_global_step_and_flush_emits_the_rest():
    timer, clock, out = make_timer(every=3)
    timer.begin()
    for step in range(5, 9):  # a resumed run: windows end at multiples of 3, like every other rank's
        run_step(timer, clock, step, data=0.1, h2d=0, compute=0.2, exchange=0, optimizer=0, other=0)
    assert [(e["step"], e["steps"]) for e in out.events] == [(6, 2)]
    timer.flush()  # end of the epoch, two steps in the window
    timer.flush()  # nothing left: no event
    assert [(e["step"], e["steps"]) for e in out.events] == [(6, 2), (8, 2)]
    assert all(e["step_s"] == pytest.approx(0.3) for e in out.events)


def test_without_a_launch_backward_is_all_compute():
    timer, clock, out = make_timer(every=1)
    timer.begin()
    run_step(timer, clock, 1, data=0.1, h2d=0.0, compute=0.4, exchange=0.0, optimizer=0.1, other=0.0, launches=0)
    clock.advance(0.1)  # one rank: nothing launched, so the "exchange" time below is compute
    timer.lap_data()
    clock.advance(0.4)
    timer.lap_split("compute", "exchange")
    timer.end_step(2)
    assert [e["exchange_s"] for e in out.events] == [0.0, 0.0]
    assert [e["compute_s"] for e in out.events] == pytest.approx([0.4, 0.4])


def test_pauses_leave_the_steps_and_are_reported_once():
    timer, clock, out = make_timer(every=2)
    timer.begin()
    run_step(timer, clock, 1, data=0.1, h2d=0, compute=0.3, exchange=0, optimizer=0, other=0)
    timer.flush()  # end of the epoch
    with timer.pause():  # between epochs; nested pauses are timed once, by the outermost
        clock.advance(1.0)
        with timer.pause("validation"):
            clock.advance(5.0)
        with timer.pause("checkpoint"):
            clock.advance(2.0)
        with timer.pause("checkpoint"):  # best.pt too: named once
            clock.advance(1.0)
    # the next epoch's first step waits 0.1 s for its batch: the pause is not data wait
    run_step(timer, clock, 2, data=0.1, h2d=0, compute=0.3, exchange=0, optimizer=0, other=0)
    first, second = out.events
    assert (first["pause_s"], first["pause"]) == (0.0, [])
    assert second["pause_s"] == pytest.approx(9.0)
    assert second["pause"] == ["validation", "checkpoint"]
    assert second["step_s"] == pytest.approx(0.4) and second["data_s"] == pytest.approx(0.1)
    run_step(timer, clock, 3, data=0.1, h2d=0, compute=0.3, exchange=0, optimizer=0, other=0)
    timer.flush()
    assert (out.events[-1]["pause_s"], out.events[-1]["pause"]) == (0.0, [])  # reported once


class DeviceClock:
    """A clock like ``CudaClock``: marks are opaque, their times known only after ``settle``."""

    def __init__(self, host: FakeClock) -> None:
        self.host = host
        self.settled = self.recycled = 0
        self.times: dict[int, float] = {}

    def mark(self) -> int:
        token = len(self.times)
        self.times[token] = self.host.t
        return token

    def remark(self, mark: int) -> int:
        self.times[mark] = self.host.t
        return mark

    def settle(self) -> None:
        self.settled += 1

    def elapsed(self, start: int, end: int) -> float:
        assert self.settled, "a device mark was read before the window's synchronize"
        return self.times[end] - self.times[start]

    def recycle(self) -> None:
        self.recycled += 1


def test_device_marks_are_read_once_per_window():
    host = FakeClock()
    device = DeviceClock(host)
    out = Recorder()
    timer = StepTimer(out, every=4, host="h", device="cuda:0", clock=device, now=host)
    timer.begin()
    for step in range(1, 9):
        run_step(timer, host, step, data=0.01, h2d=0.02, compute=0.3, exchange=0.05, optimizer=0.01, other=0.0)
    assert (device.settled, device.recycled, len(out.events)) == (2, 2, 2)
    assert out.events[0]["exchange_s"] == pytest.approx(0.05) and out.events[1]["h2d_s"] == pytest.approx(0.02)


def test_timing_every_zero_is_a_null_timer():
    out = Recorder()
    timer = make_step_timer(out, every=0, host="h", device="cpu")
    assert isinstance(timer, NullTimer)
    timer.begin()
    timer.lap_data()
    timer.lap("h2d")
    timer.exchange_launched()
    timer.lap_split("compute", "exchange")
    with timer.pause("validation"):
        pass
    timer.end_step(10)
    timer.flush()
    assert out.events == []
    assert isinstance(make_step_timer(out, every=5, host="h", device="cpu"), StepTimer)
    with pytest.raises(ValueError, match="every must be >= 1"):
        StepTimer(out, every=0, host="h", device="cpu")


class Laps:
    """A ``PhaseTimer`` that records what the engine reported."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def lap(self, phase: str) -> None:
        self.calls.append(phase)

    def lap_split(self, first: str, second: str) -> None:
        self.calls.append(f"{first}|{second}")

    def exchange_launched(self) -> None:
        self.calls.append("launch")


def test_one_rank_backward_step_laps_compute_then_optimizer(monkeypatch):
    import torch

    from lanenb_trainer.engines.ddp import DDPEngine

    for var in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    threads = torch.get_num_threads()
    try:
        eng = DDPEngine().init()
        torch.manual_seed(0)
        linear = torch.nn.Linear(4, 2)
        model, opt = eng.prepare(linear, torch.optim.SGD(linear.parameters(), lr=0.1), timed=True)
        before = model.weight.detach().clone()
        laps = Laps()
        eng.backward_step(model(torch.ones(3, 4)).sum(), opt, None, laps)
        assert laps.calls == ["compute|exchange", "optimizer"]  # one rank: nothing launched
        assert not torch.equal(before, model.weight) and eng.active_timer is None
    finally:
        torch.set_num_threads(threads)


def test_ddp_hook_marks_launches_and_keeps_ddps_arithmetic(tmp_path):
    """The communication hook registers on a real DDP model (DDP checks its signature), marks
    the buckets' launches, and scales like DDP's reducer: a multiply by 1 / world size (3
    here, on a 1-process group, so only the scaling shows), bit for bit."""
    import torch
    import torch.distributed as dist

    from lanenb_trainer.engines.ddp import DDPEngine, _timed_allreduce

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        grads, launches = [], []
        for hooked in (False, True):
            torch.manual_seed(0)
            model = torch.nn.parallel.DistributedDataParallel(
                torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 3)))
            eng = DDPEngine()
            eng.world_size = 3
            laps = Laps()
            if hooked:
                model.register_comm_hook(state=eng, hook=_timed_allreduce)
            eng.active_timer = laps
            model(torch.randn(5, 8)).square().sum().backward()
            grads.append([p.grad.clone() for p in model.parameters()])
            launches.append(laps.calls.count("launch"))
        assert launches[0] == 0 and launches[1] >= 1
        assert all(torch.equal(hooked, plain * (1.0 / 3)) for plain, hooked in zip(*grads))
    finally:
        dist.destroy_process_group()


def test_timing_every_flag(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    base = ["--data", str(data), "--run-dir", str(tmp_path / "run")]
    assert parse_config(base, {}).timing_every == 10
    assert parse_config(base + ["--timing-every", "0"], {}).timing_every == 0
    with pytest.raises(ConfigError, match="--timing-every must be an integer >= 0, got -1"):
        parse_config(base + ["--timing-every", "-1"], {})
    argv = TrainConfig(timing_every=5).to_argv()
    assert argv[argv.index("--timing-every") + 1] == "5"


def test_lanetrain_passes_timing_every_to_the_ranks(tmp_path):
    """``%lanetrain --timing-every 5`` (the magic's own parser) reaches the trainer's config."""
    pytest.importorskip("IPython")
    from lanenb.commands.arguments import spec_from_args
    from lanenb.notebook.magics import train_parser

    parser = train_parser()
    ns = parser.parse_args(["--data", str(tmp_path), "--timing-every", "5"])
    spec = spec_from_args(ns, parser)
    argv = spec.trainer_args(str(tmp_path / "run"))
    assert parse_config(argv, {}).timing_every == 5


# -- real ranks ----------------------------------------------------------------------------
RUN = dict(epochs=2, lr=0.02, timing_every=3)


@pytest.fixture(scope="module", params=engines())
def timed_run(request, synth_root, tmp_path_factory):
    engine = request.param
    code, lines = run_ranks(2, train_args(synth_root, tmp_path_factory.mktemp(f"timed-{engine}"),
                                          engine=engine, **RUN))
    assert code == 0, dump(lines)
    return engine, lines


@pytest.mark.slow
def test_every_rank_reports_where_its_steps_went(timed_run):
    _, lines = timed_run
    timing = events_of(lines, "timing")
    assert {e.rank for e in timing} == {0, 1}, dump(lines)
    total = events_of(lines, "end", rank=0)[0]["step"]
    for rank in (0, 1):
        mine = events_of(lines, "timing", rank=rank)
        assert sum(e["steps"] for e in mine) == total  # every step in exactly one window
        assert all(e["step"] % RUN["timing_every"] == 0 or e["steps"] < RUN["timing_every"] for e in mine)
    for e in timing:
        assert (e["host"], e["device"]) == (socket.gethostname(), "cpu")
        assert sum(e[f] for f in FIELDS) == pytest.approx(e["step_s"], abs=1e-5), e.data
        assert e["other_s"] >= 0 and e["step_s"] > 0
        assert e["data_s"] > 0 and e["compute_s"] > 0 and e["optimizer_s"] > 0
        assert e["exchange_s"] > 0, e.data  # two ranks: every step waits for an all-reduce


@pytest.mark.slow
def test_validation_and_checkpoint_are_pauses(timed_run):
    _, lines = timed_run
    for rank in (0, 1):
        mine = events_of(lines, "timing", rank=rank)
        paused = [i for i, e in enumerate(mine) if e["pause_s"] > 0]
        assert paused, [e.data for e in mine]
        i = paused[0]  # the first window of epoch 2 carries epoch 1's validation and checkpoint
        assert i > 0, [e.data for e in mine]
        assert set(mine[i]["pause"]) >= {"validation", "checkpoint"}, mine[i].data
        # between two events every second is step time or pause time, and none is both
        gap = mine[i].t - mine[i - 1].t
        accounted = mine[i]["steps"] * mine[i]["step_s"] + mine[i]["pause_s"]
        assert accounted == pytest.approx(gap, abs=0.005 + 0.25 * mine[i]["pause_s"]), (gap, mine[i].data)


@pytest.mark.slow
@pytest.mark.parametrize("engine", engines())
def test_timing_off_emits_nothing_and_trains_the_same(engine, synth_root, tmp_path):
    def run(every: int, name: str):
        code, lines = run_ranks(2, train_args(synth_root, tmp_path / name, engine=engine, epochs=1,
                                              max_steps=3, timing_every=every))
        assert code == 0, dump(lines)
        return lines

    on, off = run(2, "on"), run(0, "off")
    assert events_of(on, "timing") and not events_of(off, "timing")
    checksums = {e["param_checksum"] for e in events_of(on, "end") + events_of(off, "end")}
    assert len(checksums) == 1, checksums  # the comm hook and the explicit synchronize change no weight
