"""Preemption is a checkpoint, not a failure: a SIGTERM (or SIGUSR1) to any rank stops every
rank at the next step boundary, after a checkpoint the run continues from.

Schedulers take machines back with a SIGTERM and a grace period (Kubernetes evicting a pod,
a spot instance going away, the local supervisor's cancel). The handler only sets a flag: the
signal may land in the middle of a collective, where a rank cannot stop without leaving its
peers blocked. At each step boundary the ranks count the flags (``Engine.count_flags``, one
host-memory number begun with the step and read at its end, so it runs behind the step's
compute and a GPU step never waits for it); if any rank was signalled, all of them
take the same exit: checkpoint (``loop.Trainer``), a ``preempted`` event, ``end(status=
"preempted")`` and exit status :data:`lanenb_trainer.exitcodes.PREEMPTED`.

Why a flag at step boundaries, not a checkpoint in the handler: the model and optimizer are
only consistent between steps, every rank must take part in writing the checkpoint (it gathers
each rank's RNG state), and one rank's signal must reach ranks that never got one.

Why SIGUSR1 too: a SIGTERMed mpirun ends the job, SIGKILLing its ranks one second later
(``odls_base_sigkill_timeout``; raising it makes every abort wait that long), while it passes
SIGUSR1 on to every rank and lets them finish. The MPIJob launcher (``lanenb_trainer.launcher``)
turns its pod's SIGTERM into a SIGUSR1 to mpirun.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lanenb_trainer.engines import Engine

__all__ = ["Preemption", "FAULT_SIGNAL_VAR", "SIGNALS"]

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)  # what asks a rank to checkpoint and stop

# Test-only: with LANENB_FAULT_RANK/STEP, LANENB_FAULT_SIGNAL=TERM makes that rank send itself
# a SIGTERM (a preemption) instead of raising (see loop.py); the step is exact, so tests are.
FAULT_SIGNAL_VAR = "LANENB_FAULT_SIGNAL"


class Preemption:
    """Whether this rank was asked to stop (``SIGTERM``), and the ranks' agreement on it."""

    def __init__(self) -> None:
        self.signalled_at: float | None = None  # UNIX time of this rank's first SIGTERM
        self.signal_name: str | None = None
        self._pending: Callable[[], int] | None = None  # the count begun with the step
        self.names: list[str | None] = []  # each rank's signal, once the ranks agreed on stopping

    def install(self, signums: tuple[int, ...] = SIGNALS) -> Preemption:
        """Make each of ``signums`` request a preemption in this process (main thread only)."""
        for signum in signums:
            signal.signal(signum, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.signalled_at is None:  # later signals change nothing: the first one is being served
            self.signalled_at = time.time()
            self.signal_name = signal.Signals(signum).name

    def request(self) -> None:
        """What a SIGTERM does, from the process itself (the test-only fault injection)."""
        os.kill(os.getpid(), signal.SIGTERM)

    @property
    def requested(self) -> bool:
        return self.signalled_at is not None

    def begin_step(self, engine: Engine) -> None:
        """A step begins: start counting the signalled ranks (read by :meth:`end_step`), so
        the collective runs behind the step's compute."""
        self._pending = engine.count_flags_async(self.requested)

    def end_step(self, engine: Engine) -> list[float | None] | None:
        """The step is done: :meth:`agree` on the flags as they were when it began (a signal
        during the step is acted on one step later)."""
        pending, self._pending = self._pending, None
        count = pending() if pending is not None else engine.count_flags(self.requested)
        return self._times(engine) if count else None

    def agree(self, engine: Engine) -> list[float | None] | None:
        """A collective, at the same point on every rank: None when no rank was signalled (the
        usual case, one tiny all-reduce), else each rank's signal time (None for the ranks that
        got none), in rank order."""
        return self._times(engine) if engine.count_flags(self.requested) else None

    def _times(self, engine: Engine) -> list[float | None]:
        gathered = engine.gather_objects((self.signalled_at, self.signal_name))
        self.names = [name for _, name in gathered]
        return [t for t, _ in gathered]
