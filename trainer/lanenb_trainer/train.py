"""``python -m lanenb_trainer``: one rank's process, from flags to exit code.

The run itself is ``lanenb_trainer.training`` (``loop.Trainer``). This module parses the
config, starts the engine and the system monitor, and turns every failure into an ``error``
event and a prompt non-zero exit of the whole MPI world (see :func:`main`), because a rank
that dies silently would leave its peers blocked in a collective until a timeout. A SIGTERM is
not a failure: every rank checkpoints at the next step boundary and exits with
``exitcodes.PREEMPTED`` (``training/preempt.py``; SIGUSR1 too, which mpirun passes on);
SIGINT (Ctrl-C) stops at once.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence

from lanenb_trainer import events, exitcodes
from lanenb_trainer.config import ConfigError, parse_config
from lanenb_trainer.engines import Engine, EngineError, get_engine
from lanenb_trainer.monitor import SystemMonitor
from lanenb_trainer.stopping import say_stopped
from lanenb_trainer.training.loop import Trainer
from lanenb_trainer.training.preempt import Preemption
from lanenb_trainer.training.replicas import param_checksum

__all__ = ["main", "Cancelled"]


class Cancelled(Exception):
    """SIGINT (Ctrl-C): stop now. A SIGTERM preempts instead (``training/preempt.py``)."""


def _ranks_before_engine() -> tuple[int, int]:
    """(rank, world size) from the launcher, before any engine exists: only to report a bad
    config once and to know whether peers wait on us. Never raises; the engine validates."""
    from lanenb_trainer.engines.ddp import ranks_from_env

    try:
        rank, world, _, _ = ranks_from_env()
    except EngineError:
        return 0, 1
    return rank, world


def _on_signal(signum: int, _frame: object) -> None:
    raise Cancelled(f"received {signal.Signals(signum).name}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m lanenb_trainer``; returns the process exit code."""
    rank, world = _ranks_before_engine()
    try:
        cfg = parse_config(argv)
    except ConfigError as exc:
        if rank == 0:
            print(f"lanenb_trainer: error: {exc}", file=sys.stderr, flush=True)
        events.emit("error", rank, type="ConfigError", message=str(exc), traceback="", phase="config")
        return exitcodes.CONFIG
    preemption = Preemption().install()  # SIGTERM, SIGUSR1: checkpoint at the next step boundary
    signal.signal(signal.SIGINT, _on_signal)
    trainer: Trainer | None = None
    monitor: SystemMonitor | None = None
    t0 = time.time()
    try:
        engine = get_engine(cfg.engine, collective_timeout=cfg.collective_timeout, device=cfg.device).init()
        rank, world = engine.rank, engine.world_size
        trainer = Trainer(cfg, engine, preemption)
        gpu = engine.device.index if engine.device.type == "cuda" else None
        monitor = trainer.monitor = SystemMonitor(trainer.emit, rank, interval=cfg.system_interval, gpu_index=gpu)
        test = trainer.fit()
        if trainer.status == "preempted":
            return _preempted_exit(trainer, engine, monitor, t0)
        trainer.snapshot()
        monitor.stop()
        trainer.emit("end", status=trainer.status, duration_s=round(time.time() - t0, 3),
                     epoch=trainer.epoch, step=trainer.global_step, lr=trainer.lr, best=trainer.best,
                     test=test, param_checksum=param_checksum(trainer.model),
                     state_checksum=param_checksum(trainer.model, buffers=True))
        engine.barrier()
        trainer.emit.close()
        engine.shutdown()
        return exitcodes.OK
    except BaseException as exc:  # every failure must reach the event stream
        cancelled = isinstance(exc, (Cancelled, KeyboardInterrupt))
        emit = trainer.emit if trainer is not None else (lambda kind, **f: events.emit(kind, rank, **f))
        try:
            if monitor is not None:
                monitor._stop.set()
            if not cancelled:
                emit("error", type=type(exc).__name__, message=str(exc),
                     traceback="".join(traceback.format_exception(exc)))
            emit("end", status="cancelled" if cancelled else "failed",
                 duration_s=round(time.time() - t0, 3),
                 step=trainer.global_step if trainer else 0, best=trainer.best if trainer else None)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            code = exitcodes.CANCELLED if cancelled else exitcodes.FAILED
            if world > 1:
                # Peers may be blocked in a collective with us: exit now, without running
                # atexit/teardown that could itself block, so mpirun tears the world down.
                os._exit(code)
        return code


def _preempted_exit(trainer: Trainer, engine: Engine, monitor: SystemMonitor, t0: float) -> int:
    """After the preemption checkpoint: ``end(status=...)`` with the stop's reason (``preempted``,
    ``suspended`` or ``cancelled``: ``lanenb_trainer.stopping``), then every rank leaves
    together. The barrier comes after each rank's last event (and TensorBoard's last scalars)
    and rank 0's checkpoint: mpirun stops the whole world as soon as one rank exits non-zero,
    with a SIGTERM that from then on ends a rank at once (its work is saved; left to the
    preemption handler, a rank still tearing down would wait for mpirun's SIGKILL)."""
    monitor.stop()
    trainer.emit("end", status=trainer.stop_reason, duration_s=round(time.time() - t0, 3), epoch=trainer.epoch,
                 step=trainer.global_step, lr=trainer.lr, best=trainer.best)
    trainer.emit.close()
    sys.stdout.flush()
    say_stopped()  # the launcher may let mpirun go on: what is left needs it (MPI finalize)
    engine.barrier()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    engine.shutdown()
    return exitcodes.PREEMPTED
