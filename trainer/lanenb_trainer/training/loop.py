"""The training loop: data-parallel SCNN training on one rank, reported through events.

Rank 0 owns the run directory (``config.json``, ``events.jsonl``, checkpoints, predictions,
``metrics.json``); every rank prints ``@lanenb`` events. A run is: build the parts
(``build.py``), continue from a checkpoint with ``--resume`` or when the run dir holds this
run's own (``resume.py``), then epochs of steps, each epoch validated (``evaluate.py``) and
checkpointed, and the test set scored with the last and the best model at the end. A SIGTERM
to any rank ends the run at the next step boundary with a checkpoint (``preempt.py``). A
checkpoint of another number of ranks continues with ``resize.py``'s plan: ``k`` micro-batches
per optimizer step (``accumulate.py``) or an LR rule.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from pathlib import Path
from typing import Any

import torch

from lanenb_trainer.atomic import write_json
from lanenb_trainer.config import TrainConfig, global_batch
from lanenb_trainer.data.masks import NUM_SLOTS
from lanenb_trainer.engines import Engine
from lanenb_trainer.epochs import epoch_text
from lanenb_trainer.evaluation.headline import from_metrics
from lanenb_trainer.events import EventLog
from lanenb_trainer.monitor import SystemMonitor
from lanenb_trainer.recipe import lr_at, scnn_loss, warmup_for
from lanenb_trainer.stopping import CANCELLED, stop_reason
from lanenb_trainer.tensorboard_log import open_sink
from lanenb_trainer.training import build
from lanenb_trainer.training.accumulate import Accumulator
from lanenb_trainer.training.attempts import ProgressMark, forget_resumes, record_resume
from lanenb_trainer.training.batches import to_device
from lanenb_trainer.training.evaluate import Evaluator
from lanenb_trainer.training.precision import configure_algorithms, resolve_precision
from lanenb_trainer.training.preempt import FAULT_SIGNAL_VAR, Preemption
from lanenb_trainer.training.replicas import sync_buffers
from lanenb_trainer.training.resize import ResizePlan, Schedule
from lanenb_trainer.training.resume import (
    DAMAGED_NOTE,
    EpochTally,
    ResumePoint,
    RngState,
    last_checkpoint,
    load_training_state,
    read_resume_point,
    resume_state,
    save_checkpoint,
)
from lanenb_trainer.training.snapshot import snapshot_pvc
from lanenb_trainer.training.timing import make_step_timer

__all__ = ["Trainer", "FAULT_RANK_VAR", "FAULT_STEP_VAR", "EPOCH_DONE", "STOPPED", "PREEMPTED"]

# Test-only fault injection: the rank LANENB_FAULT_RANK raises at global step LANENB_FAULT_STEP
# (with LANENB_FAULT_SIGNAL=TERM it sends itself a SIGTERM instead: preempt.py; with
# TERM-AT-EPOCH-END it does so while the epoch ending at that step is validated).
FAULT_RANK_VAR = "LANENB_FAULT_RANK"
FAULT_STEP_VAR = "LANENB_FAULT_STEP"
FAULT_AT_EPOCH_END = "TERM-AT-EPOCH-END"

# how an epoch's steps ended (Trainer._train_epoch)
EPOCH_DONE = "epoch done"
STOPPED = "stopped"  # --max-steps
PREEMPTED = "preempted"  # a rank got SIGTERM


def _fault_step(rank: int) -> int | None:
    fr, fs = os.environ.get(FAULT_RANK_VAR), os.environ.get(FAULT_STEP_VAR)
    if fr is None or fs is None:
        return None
    return int(fs) if int(fr) == rank else None


class Trainer:
    """One rank's run of ``cfg`` on ``engine``: :meth:`fit`, then :meth:`snapshot`.

    The loop's position (``epoch``, ``step_in_epoch``, ``global_step``, ``lr``, ``best``) and
    the epoch's sums so far (``tally``) are what a checkpoint saves and a resume restores;
    ``status`` ends as ``completed``, ``stopped`` (``--max-steps``) or ``preempted`` (a SIGTERM
    that ``preemption`` caught: :meth:`fit` then returns after the checkpoint, without the test).
    """

    def __init__(self, cfg: TrainConfig, engine: Engine, preemption: Preemption | None = None) -> None:
        self.cfg = cfg
        self.engine = engine
        self.rank = engine.rank
        self.primary = engine.is_primary
        self.run_dir = Path(cfg.run_dir)
        if self.primary:
            (self.run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
        self.emit = EventLog(self.rank, self.run_dir / "events.jsonl" if self.primary else None)
        if cfg.tensorboard:  # run_dir/tensorboard/: the same events as scalars (tensorboard_log.py)
            sink = open_sink(self.run_dir, self.rank, primary=self.primary)
            if sink is not None:
                self.emit.add_listener(sink)
        # where each step's time goes, on every rank (``timing`` events, see training/timing.py)
        self.timer = make_step_timer(self.emit, every=cfg.timing_every, host=socket.gethostname(),
                                     device=engine.device)
        self.t0 = time.time()
        self.global_step = 0
        self.epoch = 0
        self.step_in_epoch = 0
        self.best: dict[str, Any] | None = None
        self.lr = 0.0
        self.status = "running"
        self.fault_step = _fault_step(self.rank)
        self.fault_signal = os.environ.get(FAULT_SIGNAL_VAR)
        self.monitor: SystemMonitor | None = None  # started once the start event is out
        self.resumed_from: dict[str, Any] | None = None
        self.resume_point: ResumePoint | None = None
        self.pending_rng: RngState | None = None  # the checkpoint's RNG, restored in the first epoch
        self.tally = EpochTally()  # this rank's sums over the current epoch's steps
        self.pending_tally: EpochTally | None = None  # the checkpoint's, taken back in the first epoch
        self.preemption = preemption if preemption is not None else Preemption()
        self.checkpoint_s = 0.0  # how long the last checkpoint took (rank 0: writing it)
        self.signalled: list[float | None] | None = None  # each rank's SIGTERM time, once agreed
        # the last step rank 0 finished, for the steps a restart loses (attempts.py)
        self.progress = ProgressMark(self.run_dir) if self.primary else None
        # sizing (training/resize.py): micro-batches per optimizer step and the LR factor (a
        # resize's plan), what the LR schedule counts against, the samples of the epoch's order
        # all ranks consumed, and the images since step 0 (the schedule's clock)
        self.plan: ResizePlan | None = None
        self.schedule: Schedule | None = None
        self.epoch_position = 0
        self.images_done = 0

    # -- set-up ---------------------------------------------------------------------------
    def _build(self) -> None:
        """The parts, in the order that fixes the initialisation (see ``build.py``)."""
        cfg, eng = self.cfg, self.engine
        log = self.emit.log if self.primary else None
        configure_algorithms(cfg.deterministic)
        self.data = build.build_splits(cfg, eng.world_size, log)
        found = self._find_checkpoint()
        model = build.build_model(cfg, self.rank, log, resuming=found is not None)
        optimizer = build.build_optimizer(model, cfg, eng.world_size)
        point = None
        if found is not None:
            point = read_resume_point(cfg, self.run_dir, rank=self.rank, world_size=eng.world_size,
                                      state=found[0], automatic=found[1])
            self._continue_from(point)
        self.precision = resolve_precision(cfg, eng.device)
        # the memory format before DDP wraps the model: its buckets follow the parameters' strides
        model = self.precision.model(model.to(eng.device))
        self.model, self.optimizer = eng.prepare(model, optimizer, timed=cfg.timing_every > 0)
        self.scaler = self.precision.scaler()
        if point is not None:
            load_training_state(point, self.model, self.optimizer, self.scaler)
        self.evaluator = Evaluator(cfg, eng, precision=self.precision)
        self.train_loader = build.build_train_loader(self.data.train, cfg, self.rank, eng.world_size)
        self._size(point)

    def _size(self, point: ResumePoint | None) -> None:
        """Steps per epoch and the LR schedule at this run's size, and (resumed) where the
        checkpoint's epoch and schedule stood, in samples (the same units at any size)."""
        cfg, world = self.cfg, self.engine.world_size
        plan = point.plan if point is not None else None
        k = plan.accumulation if plan is not None else 1
        self.accumulation, self.lr_factor = k, plan.factor if plan is not None else 1.0
        self.global_batch = plan.global_batch if plan is not None else global_batch(cfg.batch_size, world)
        self.steps_per_epoch = len(self.train_loader) // k
        self.total_steps = self.steps_per_epoch * cfg.epochs
        if point is None:
            self.schedule = Schedule(world, self.global_batch, self.total_steps)
            return
        state = point.state
        was = global_batch(int((state.get("config") or {}).get("batch_size") or cfg.batch_size),
                           int(state["world_size"])) * int(state.get("accumulation") or 1)
        was = int(state.get("global_batch") or was)
        self.epoch_position = int(state.get("epoch_position", point.step_in_epoch * was))
        self.images_done = int(state.get("images_done", point.global_step * was))
        self.schedule = Schedule.from_state(state, self.steps_per_epoch)
        self.plan = plan
        if plan is not None and plan.resized:  # the steps left at this size (another global batch: others)
            self.step_in_epoch = self.epoch_position // self.global_batch
            left = self._steps_left_in_epoch() + (cfg.epochs - self.epoch - 1) * self.steps_per_epoch
            self.total_steps = self.global_step + max(0, left)

    def _steps_left_in_epoch(self) -> int:
        """Optimizer steps from ``epoch_position`` to the epoch's end at this run's size."""
        sampler = self.train_loader.sampler
        per_rank = max(0, sampler.total_size - self.epoch_position) // self.engine.world_size
        return per_rank // self.cfg.batch_size // self.accumulation

    def _find_checkpoint(self) -> tuple[dict[str, Any], bool] | None:
        """The checkpoint to continue from (``resume.resume_state``), the same on every rank.

        Raises:
            RuntimeError: some ranks find this run's checkpoint and others do not (a run dir
                that is not on storage every rank shares).
        """
        found = resume_state(self.cfg, self.run_dir)
        seen = self.engine.gather_objects(found is not None)
        if len(set(seen)) > 1:
            raise RuntimeError(
                f"ranks {[r for r, s in enumerate(seen) if s]} find this run's checkpoint "
                f"{last_checkpoint(self.run_dir)} and ranks {[r for r, s in enumerate(seen) if not s]} do not: "
                "put --run-dir on storage every rank shares")
        return found

    def _continue_from(self, point: ResumePoint) -> None:
        self.epoch, self.step_in_epoch = point.epoch, point.step_in_epoch
        self.global_step, self.best = point.global_step, point.best
        self.resumed_from = point.describe()
        self.resume_point = point
        self.pending_rng = point.rng
        self.pending_tally = point.tally

    def _lr(self) -> float:
        """The schedule's rate at this step: counted in the images done at the run's first global
        batch (its optimizer steps, whatever the size since), times a resize's LR rule factor."""
        sched = self.schedule
        assert sched is not None
        return lr_at(self.images_done // sched.global_batch, self.cfg, sched.world_size,
                     sched.total_steps) * self.lr_factor

    def _restore_rng(self) -> None:
        assert self.pending_rng is not None
        self.pending_rng.restore(self.engine.device)
        self.pending_rng = None

    def _save(self, *, best: bool, preempted: bool = False) -> None:
        t0 = time.perf_counter()
        with self.timer.pause("checkpoint"):
            self._write_checkpoint(best=best, preempted=preempted)
        self.checkpoint_s = time.perf_counter() - t0

    def _write_checkpoint(self, *, best: bool, preempted: bool = False) -> None:
        save_checkpoint(engine=self.engine, run_dir=self.run_dir, cfg=self.cfg,
                        model_args={"backbone": self.cfg.backbone, "num_lanes": NUM_SLOTS,
                                    "input_size": list(self.cfg.image_size)},
                        model=self.model, optimizer=self.optimizer, scaler=self.scaler, epoch=self.epoch,
                        step_in_epoch=self.step_in_epoch, global_step=self.global_step, lr=self.lr,
                        best=self.best, is_best=best, emit=self.emit, tally=self.tally,
                        preempted=self.stop_reason if preempted else False,
                        sizing={"accumulation": self.accumulation, "global_batch": self.global_batch,
                                "lr_factor": self.lr_factor, "epoch_position": self.epoch_position,
                                "images_done": self.images_done,
                                "schedule": self.schedule.to_dict() if self.schedule else None})

    # -- the loop -------------------------------------------------------------------------
    def _train_epoch(self) -> str:
        """Train until the epoch ends (``EPOCH_DONE``), ``--max-steps`` is reached (``STOPPED``)
        or the ranks agree that one of them got a SIGTERM (``PREEMPTED``, at a step boundary)."""
        cfg, eng, timer = self.cfg, self.engine, self.timer
        dev = eng.device
        timer.begin()
        self.data.train.set_epoch(self.epoch)
        sampler = self.train_loader.sampler
        sampler.set_epoch(self.epoch)
        sampler.set_start_position(self.epoch_position)  # what all ranks consumed, at any size
        epoch_end = self.step_in_epoch + self._steps_left_in_epoch()
        acc = Accumulator(self.accumulation, [p for p in self.model.parameters() if p.requires_grad], self.scaler)
        # the sums of a mid-epoch checkpoint carry on; an epoch's first step starts them at 0
        tally = self.pending_tally if self.pending_tally is not None and self.epoch_position else EpochTally()
        self.tally, self.pending_tally = tally, None
        # this window's (loss, seg, exist) per step, on the device: read once per log window, so
        # a GPU step never waits for the host (one sync per --log-every steps, not three a step)
        window: list[torch.Tensor] = []
        win_t = time.perf_counter()
        epoch_t = time.perf_counter() - tally.seconds
        # Creating the iterator draws from the RNG: an epoch-end checkpoint was taken before
        # that draw, a mid-epoch one after it.
        if self.pending_rng is not None and self.epoch_position == 0:
            self._restore_rng()
        batches = iter(self.train_loader)
        if self.pending_rng is not None:
            self._restore_rng()
        for batch in batches:
            if self.step_in_epoch >= epoch_end:
                continue  # micro-batches short of a whole step at the epoch's end (accumulation)
            timer.lap_data()
            if acc.count == 0:  # an optimizer step begins
                if (self.fault_step is not None and self.global_step >= self.fault_step
                        and self.fault_signal != FAULT_AT_EPOCH_END):
                    self._inject_fault()
                self.preemption.begin_step(eng)  # is any rank being preempted? read when the step is done
                self.lr = self._lr()
                for group in self.optimizer.param_groups:
                    group["lr"] = self.lr
            images, mask, exist = to_device(batch, dev)
            images = self.precision.batch(images)
            timer.lap("h2d")
            tally.images += images.shape[0]
            if not acc.stepping:  # one of the step's first k - 1 micro-batches: gradients held
                with eng.no_sync(self.model), self.precision.autocast():
                    seg, ex = self.model(images)
                loss, seg_l, ex_l = scnn_loss(seg, ex, mask, exist)
                acc.add(loss, torch.stack([loss.detach(), seg_l.detach(), ex_l.detach()]).float())
                timer.lap("compute")
                continue
            with self.precision.autocast():
                seg, ex = self.model(images)
            loss, seg_l, ex_l = scnn_loss(seg, ex, mask, exist)
            eng.backward_step(acc.step_loss(loss), self.optimizer, self.scaler, timer)
            self.global_step += 1
            self.step_in_epoch += 1
            self.epoch_position += self.global_batch
            self.images_done += self.global_batch
            window.append(acc.step_parts(torch.stack([loss.detach(), seg_l.detach(), ex_l.detach()]).float()))
            last = self.step_in_epoch == epoch_end
            stop = bool(cfg.max_steps) and self.global_step >= cfg.max_steps
            signalled = self.preemption.end_step(eng)  # every rank, every step: one host-memory number
            if stop:
                signalled = None  # the run ends here anyway, with its test
            if self.global_step % cfg.log_every == 0 or last or stop or signalled is not None:
                rows = self._read_window(window)  # every rank: each checks its own losses
                for row in rows:  # step by step, in float64: the sums do not depend on the windows
                    tally.loss_sum += row[0]
                    tally.steps += 1.0
                if self.primary:
                    dt, n = time.perf_counter() - win_t, len(rows)
                    mean = [sum(row[j] for row in rows) / n for j in range(3)]
                    self.emit("step", epoch=self.epoch, step=self.global_step, epoch_step=self.step_in_epoch,
                              steps_per_epoch=self.steps_per_epoch, total_steps=self.total_steps,
                              loss=mean[0], seg_loss=mean[1], exist_loss=mean[2], lr=self.lr,
                              images_per_s=n * self.global_batch / max(dt, 1e-9),
                              step_time_s=dt / n)
                window, win_t = [], time.perf_counter()
            if self.progress is not None:
                self.progress.mark(self.global_step)
            timer.end_step(self.global_step)
            if stop or signalled is not None:
                timer.flush()
                tally.seconds = time.perf_counter() - epoch_t
                self.signalled = signalled
                return STOPPED if stop else PREEMPTED
        timer.flush()
        with timer.pause():  # a collective between epochs: not step time
            sums = torch.tensor([tally.loss_sum, tally.steps], dtype=torch.float64)
            total = eng.allreduce_sum(sums.to(dev)).cpu()
        dt = time.perf_counter() - epoch_t
        self.epoch_summary: dict[str, Any] = {"train_loss": float(total[0] / max(1.0, float(total[1]))),
                              "duration_s": round(dt, 3),
                              "images_per_s": tally.images * eng.world_size / max(dt, 1e-9)}
        return EPOCH_DONE

    def _inject_fault(self) -> None:
        """The test-only fault (``LANENB_FAULT_*``): raise, or with ``LANENB_FAULT_SIGNAL`` send
        this rank a SIGTERM once, when exactly ``LANENB_FAULT_STEP`` steps are done (so a run
        resumed past that step is not preempted again)."""
        step = self.fault_step
        if not self.fault_signal:
            raise RuntimeError(f"injected fault on rank {self.rank} at step {self.global_step} "
                               f"({FAULT_RANK_VAR}/{FAULT_STEP_VAR})")
        self.fault_step = None
        if self.global_step == step:
            self.preemption.request()

    def _read_window(self, window: list[torch.Tensor]) -> list[list[float]]:
        """The window's (loss, seg loss, exist loss) per step on the host: the one sync per window.

        Raises:
            FloatingPointError: a loss in the window is not finite, naming its step. The
                optimizer has stepped on it (float16's loss scaler skips such steps; float32
                and bfloat16 do not), but nothing has been saved since: checkpoints are
                written after a window is read.
        """
        losses = torch.stack(window).to("cpu", torch.float64)
        bad = (~torch.isfinite(losses[:, 0])).nonzero()
        if len(bad):
            i = int(bad[0, 0])
            step = self.global_step - len(window) + i + 1  # numbered as the step events are
            raise FloatingPointError(f"loss is {float(losses[i, 0])} at step {step}: "
                                     f"lower --lr (now {self.cfg.lr} per rank)")
        return losses.tolist()

    def _end_epoch(self) -> None:
        """Validate (or compare train loss without ``--use-val``), report the epoch, keep the
        best, and checkpoint the start of the next epoch (``best.pt`` shares the state)."""
        summary: dict[str, Any] = dict(self.epoch_summary)
        metric: dict[str, Any] = {}
        if self.fault_signal == FAULT_AT_EPOCH_END and self.fault_step == self.global_step:
            self.fault_step = None
            self.preemption.request()  # the test-only SIGTERM during validation (LANENB_FAULT_*)
        if self.data.val is not None:
            with self.timer.pause("validation"):
                metric = self.evaluator.validate(self.model, self.data.val)
            if self.primary:
                self.emit("eval", split="val", epoch=self.epoch, step=self.global_step, **metric)
            improved = self.best is None or metric["accuracy"] > self.best["accuracy"]
        else:
            improved = self.best is None or summary["train_loss"] < self.best["train_loss"]
        if self.primary:
            self.emit("epoch", epoch=self.epoch, step=self.global_step, epochs=self.cfg.epochs, lr=self.lr,
                      **summary, **({f"val_{k}": v for k, v in metric.items()}))
        if improved:
            self.best = {"epoch": self.epoch, "step": self.global_step, **summary,
                         **{k: metric[k] for k in ("accuracy", "fp", "fn") if k in metric}}
        self.epoch, self.step_in_epoch, self.tally = self.epoch + 1, 0, EpochTally()
        self.epoch_position = 0
        self._save(best=improved)

    def _start(self) -> None:
        """The ``start`` event, the system monitor, and (fresh runs) ``config.json``."""
        cfg, eng = self.cfg, self.engine
        desc = eng.describe()
        self.emit("start", config=cfg.to_dict(), world_size=eng.world_size, engine=eng.name,
                  device=desc["device"], threads=desc["threads"], local_rank=eng.local_rank,
                  local_size=eng.local_size, pid=os.getpid(), host=os.uname().nodename,
                  train_frames=len(self.data.train), val_frames=len(self.data.val) if self.data.val else 0,
                  test_frames=len(self.data.test) if self.data.test else 0,
                  steps_per_epoch=self.steps_per_epoch, total_steps=self.total_steps,
                  parameters=sum(p.numel() for p in self.model.parameters()), **self.precision.describe(),
                  resumed_from=self.resumed_from)
        if self.monitor is not None:
            self.monitor.start()
        if not self.primary:
            return
        point = self.resume_point
        if point is not None and point.state.get(DAMAGED_NOTE):  # said before the resume it explains
            self.emit.log(str(point.state[DAMAGED_NOTE]))
        if point is not None:  # counted, with the steps this interruption cost (attempts.py)
            self.emit("resumed", **record_resume(self.run_dir, step=point.global_step, epoch=point.epoch,
                                                 preempted=point.preempted, automatic=point.automatic,
                                                 reason=point.stop_reason,
                                                 checkpoint=point.saved_at,
                                                 resized=point.plan.describe() if point.plan and point.plan.resized
                                                 else None))
            return
        forget_resumes(self.run_dir)
        warmup = warmup_for(cfg.warmup_steps, self.total_steps)
        if warmup < cfg.warmup_steps:  # said once, where the user reads the run
            self.emit.log(f"warm-up shortened to {warmup} step(s): --warmup-steps {cfg.warmup_steps} is more than a "
                          f"fifth of this {self.total_steps}-step run (the learning rate would never reach "
                          f"its target)")
        if self.progress is not None:
            self.progress.mark(0)  # a reused run dir: an earlier run's mark is not this run's progress
        write_json(self.run_dir / "config.json", {
            **cfg.to_dict(), "world_size": eng.world_size, "engine": eng.name,
            "steps_per_epoch": self.steps_per_epoch, "total_steps": self.total_steps})

    def fit(self) -> dict[str, Any] | None:
        """Train to ``--epochs`` (or ``--max-steps``), then score the test set; returns the last
        model's test scores on rank 0 (None elsewhere, or without a test split)."""
        cfg = self.cfg
        self._build()
        self._start()
        self.model.train()
        completed = True
        outcome = EPOCH_DONE
        while self.epoch < cfg.epochs:
            if self.step_in_epoch >= self.steps_per_epoch and self.pending_tally is None:
                # an older checkpoint at an epoch's last step: without its sums the epoch's end
                # cannot be reported as it was; go on with the next epoch
                self.epoch, self.step_in_epoch, self.epoch_position = self.epoch + 1, 0, 0
                continue
            if cfg.max_steps and self.global_step >= cfg.max_steps:  # resumed at the limit already
                completed = False
                break
            outcome = self._train_epoch()  # resumed at an epoch's last step: no step, the epoch's end
            with self.timer.pause():  # between epochs: its parts name themselves (validation, checkpoint)
                if outcome == PREEMPTED:  # each rank's buffers as they are: averaged at epoch ends only
                    self._save(best=False, preempted=True)
                    break
                sync_buffers(self.model, self.engine)
                if outcome == STOPPED:
                    completed = False
                    self._save(best=False)
                    break
                self._end_epoch()
            # a SIGTERM during validation or the checkpoint: stop now, with 0 steps to take again
            self.signalled = self.preemption.agree(self.engine)
            if self.signalled is not None:
                outcome = PREEMPTED
                # the epoch's checkpoint is this step's: written again so that it says it was
                # preempted (the resumed run reports a preemption, not a lost rank)
                self._save(best=False, preempted=True)
                break
        if outcome == PREEMPTED:
            self._preempted()
            return None
        self.status = "completed" if completed else "stopped"
        return self._finish()

    def _preempted(self) -> None:
        """The run stops for a SIGTERM after its checkpoint: rank 0 says where and how long it took,
        and why (``stop_reason``): a preemption or the user's suspend is a ``preempted`` event
        with its ``reason``; the user's cancel is no preemption, only a log line (and ``end``
        says ``cancelled``)."""
        self.status = "preempted"
        if not self.primary or self.signalled is None:
            return
        times = [t for t in self.signalled if t is not None]
        names = [n for n in self.preemption.names if n]
        if self.stop_reason == CANCELLED:
            self.emit.log(f"cancelled: every rank stopped at step {self.global_step} with a checkpoint written in "
                          f"{self.checkpoint_s:.2f}s")
            return
        self.emit("preempted", epoch=self.epoch, step=self.global_step, epoch_step=self.step_in_epoch,
                  steps_per_epoch=self.steps_per_epoch, signal=names[0] if names else "SIGTERM",
                  ranks=[r for r, t in enumerate(self.signalled) if t is not None],
                  checkpoint_s=round(self.checkpoint_s, 3),
                  since_signal_s=round(time.time() - min(times), 3) if times else None,
                  path=str(last_checkpoint(self.run_dir)), reason=self.stop_reason)

    @functools.cached_property
    def stop_reason(self) -> str:
        """Why the ranks were signalled (``lanenb_trainer.stopping``), read once, when they stop."""
        return stop_reason(self.run_dir)

    def _test_best(self, last_test: dict[str, Any] | None) -> dict[str, Any] | None:
        """The test with ``best.pt`` too: the same numbers when the last epoch was the best. Not
        without validation: ``best.pt`` is then kept by train loss, not a validated best model."""
        if self.data.test is None or self.best is None or self.data.val is None:
            return None
        if self.best.get("epoch") == self.epoch - 1 and self.status == "completed":
            return dict(last_test) if last_test is not None else None
        return self.evaluator.test_best(self.model, self.data.test, self.run_dir)

    def _finish(self) -> dict[str, Any] | None:
        """Score the test set with the last and the best model; rank 0 writes ``metrics.json``."""
        test = (self.evaluator.test(self.model, self.data.test, self.run_dir)
                if self.data.test is not None else None)
        test_best = self._test_best(test)
        if self.primary:
            # the headline is the selected model's (best.pt) when there is one, else the last model's
            chosen = test_best if test_best is not None else test
            headline = {k: (chosen or {}).get(k) for k in ("accuracy", "fp", "fn")}
            metrics = {**headline, "headline_model": "best.pt" if test_best is not None else "last model",
                       "best_epoch": (self.best or {}).get("epoch") if self.data.val is not None else None,
                       "models": {"test": f"last model (after {epoch_text(self.epoch - 1)}, step {self.global_step})",
                                  "test_best": (f"best.pt ({epoch_text((self.best or {}).get('epoch'))})"
                                                if test_best is not None else None)},
                       "status": self.status, "test": test, "test_best": test_best, "best": self.best,
                       "epochs": self.epoch,
                       "steps": self.global_step, "world_size": self.engine.world_size,
                       "engine": self.engine.name, "duration_s": round(time.time() - self.t0, 3)}
            # the labelled headline ("best.pt, epoch 6", and the last model's beside it): the rule
            # every face applies (evaluation/headline.py), so the file and the faces agree
            found = from_metrics(metrics)
            metrics["headline"] = None if found is None else found.to_dict()
            write_json(self.run_dir / "metrics.json", metrics)
            if test is not None:
                self.emit("eval", split="test", epoch=self.epoch, step=self.global_step, model="last", **test)
            if test_best is not None:
                self.emit("eval", split="test", epoch=(self.best or {}).get("epoch"), step=self.global_step,
                          model="best", **test_best)
        return test

    def snapshot(self) -> None:
        """``ENABLE_SNAPSHOT``: rank 0 snapshots ``--pvc-name`` (``snapshot.py``)."""
        if self.primary and self.cfg.enable_snapshot:
            snapshot_pvc(self.cfg, self.run_dir, self.best, self.emit)
