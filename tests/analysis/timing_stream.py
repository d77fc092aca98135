"""Synthetic ``timing`` event streams (docs/EVENTS.md) for the doctor's tests: every rank's
windows as the trainer emits them, with event times that advance by what the windows lasted."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from lanenb.analysis.runstate import RunState
from lanenb_trainer.events import Event, format_event, parse_line

PARTS = ("data_s", "h2d_s", "compute_s", "exchange_s", "optimizer_s")


def event(kind: str, rank: int = 0, t: float = 0.0, **fields) -> Event:
    """An event as ``parse_line`` reads it from a rank's line, with its time set to ``t``."""
    e = parse_line(format_event(kind, rank, **fields))
    assert e is not None
    return Event(kind=e.kind, rank=e.rank, t=t, v=e.v, data=e.data)


def window(rank: int, step: int, t: float, steps: int = 10, host: str = "node-a", device: str = "cpu",
           **parts: float) -> Event:
    """One rank's window: the per-step means given in ``parts`` (seconds), ``other_s`` the rest."""
    values = {p: float(parts.get(p, 0.0)) for p in PARTS}
    step_s = float(parts.get("step_s", sum(values.values()) + parts.get("other_s", 0.0)))
    other = max(0.0, step_s - sum(values.values()))
    return event("timing", rank, t, step=step, steps=steps, host=host, device=device, step_s=step_s,
                 other_s=other, pause_s=0.0, pause=[], **values)


@dataclass
class Run:
    """A run of ``ranks`` ranks whose steps are shaped by ``profile(rank, window_index)``
    (seconds of data wait, compute, ... per step), synchronised like a real all-reduce:
    every rank's step ends when the slowest rank's busy time is over, the others wait in the
    exchange. Windows of ``steps`` steps; ``hosts`` per rank."""

    ranks: int = 2
    steps: int = 10
    exchange_s: float = 0.01  # the transfer itself, paid by every rank
    hosts: Mapping[int, str] = field(default_factory=dict)
    device: str = "cpu"
    t: float = 1000.0
    step: int = 0
    index: int = 0

    def windows(self, profile, count: int) -> Iterator[Event]:
        """``count`` more windows of every rank; ``profile(rank, index) -> dict`` of
        ``data_s``, ``compute_s``, ``h2d_s``, ``optimizer_s``, ``other_s`` (busy parts)."""
        for _ in range(count):
            shapes = {r: profile(r, self.index) for r in range(self.ranks)}
            busy = {r: sum(s.values()) for r, s in shapes.items()}
            slowest = max(busy.values())
            step_s = slowest + self.exchange_s
            self.step += self.steps
            self.t += step_s * self.steps
            for r, shape in shapes.items():
                wait = slowest - busy[r] + self.exchange_s
                parts = {k: v for k, v in shape.items() if k != "other_s"}
                yield window(r, self.step, self.t, self.steps, self.hosts.get(r, "node-a"), self.device,
                             step_s=step_s, exchange_s=wait, **parts)
            self.index += 1


def fold(events, state: RunState | None = None) -> RunState:
    state = state or RunState()
    for e in events:
        state.fold(e)
    return state


def jitter(seed: int, spread: float = 0.05):
    """A profile modifier: each part times a random factor in 1 +- ``spread`` (real steps vary)."""
    rng = random.Random(seed)

    def apply(shape: dict[str, float]) -> dict[str, float]:
        return {k: v * (1.0 + rng.uniform(-spread, spread)) for k, v in shape.items()}

    return apply
