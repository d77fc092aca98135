"""The training loop every rank runs: data-parallel SCNN training that reports through events.

Rank 0 owns the run directory; every rank prints ``@lanenb`` events. Failures are turned
into an ``error`` event and a prompt non-zero exit of the whole MPI world (see
:func:`main`), because a rank that dies silently would leave its peers blocked in a
collective until a timeout.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

import torch

from lanenb_trainer import checkpoint as ckpt
from lanenb_trainer import events
from lanenb_trainer.atomic import write_json
from lanenb_trainer.config import ConfigError, TrainConfig, parse_config
from lanenb_trainer.engines import Engine, EngineError, get_engine
from lanenb_trainer.monitor import SystemMonitor
from lanenb_trainer.data.augment import normalize_images
from lanenb_trainer.data.masks import NUM_SLOTS
from lanenb_trainer.events import MAX_EVENT_CHARS, EventLog  # noqa: F401 - re-exported
from lanenb_trainer.recipe import BACKGROUND_WEIGHT, EXIST_WEIGHT, lr_at, scnn_loss  # noqa: F401


# Test-only fault injection: the rank LANENB_FAULT_RANK raises at global step LANENB_FAULT_STEP.
FAULT_RANK_VAR = "LANENB_FAULT_RANK"
FAULT_STEP_VAR = "LANENB_FAULT_STEP"


class Cancelled(Exception):
    """SIGTERM/SIGINT from the launcher (Ctrl-C, job cancel)."""


def param_checksum(model: torch.nn.Module, *, buffers: bool = False) -> str:
    """SHA-256 of the parameters (and buffers): equal on all ranks iff they hold the same model."""
    h = hashlib.sha256()
    m = ckpt.unwrap(model)
    items = m.state_dict().items() if buffers else m.named_parameters()
    for name, t in items:
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def sync_buffers(model: torch.nn.Module, engine: Engine) -> None:
    """Average BatchNorm running statistics, which data-parallel training leaves per rank.

    Done before evaluation and checkpoints so every rank evaluates (and rank 0 saves) the
    same model.
    """
    if engine.world_size == 1:
        return
    for buf in ckpt.unwrap(model).buffers():
        if buf.is_floating_point():
            buf.copy_(engine.allreduce_sum(buf) / engine.world_size)


def _fault_step(rank: int) -> int | None:
    fr, fs = os.environ.get(FAULT_RANK_VAR), os.environ.get(FAULT_STEP_VAR)
    if fr is None or fs is None:
        return None
    return int(fs) if int(fr) == rank else None


class Trainer:
    def __init__(self, cfg: TrainConfig, engine: Engine) -> None:
        self.cfg = cfg
        self.engine = engine
        self.rank = engine.rank
        self.primary = engine.is_primary
        self.run_dir = Path(cfg.run_dir)
        if self.primary:
            (self.run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
        self.emit = EventLog(self.rank, self.run_dir / "events.jsonl" if self.primary else None)
        self.t0 = time.time()
        self.global_step = 0
        self.epoch = 0
        self.step_in_epoch = 0
        self.best: dict[str, Any] | None = None
        self.lr = 0.0
        self.status = "running"
        self.fault_step = _fault_step(self.rank)
        self.monitor: SystemMonitor | None = None  # started once the start event is out

    # -- set-up ---------------------------------------------------------------------------
    def _datasets(self) -> None:
        from lanenb_trainer.data.tusimple import TuSimpleDataset

        cfg = self.cfg
        vf = cfg.val_fraction if cfg.use_val else 0.0
        # normalize=False: workers ship uint8 frames/masks, _to_device normalises per batch
        self.train_ds = TuSimpleDataset(cfg.data, "train", size=cfg.image_size, augment=cfg.augment,
                                        seed=cfg.seed, val_fraction=vf, normalize=False)
        self.val_ds = (TuSimpleDataset(cfg.data, "val", size=cfg.image_size, augment=False,
                                       seed=cfg.seed, val_fraction=vf, normalize=False)
                       if cfg.use_val else None)
        try:
            self.test_ds = TuSimpleDataset(cfg.data, "test", size=cfg.image_size, augment=False,
                                           seed=cfg.seed, normalize=False)
        except ValueError as exc:  # no test_label.json: train anyway, say why there is no test score
            self.test_ds = None
            if self.primary:
                self.emit.log(f"no test evaluation: {exc}")
        if len(self.train_ds) < self.engine.world_size * self.cfg.batch_size:
            raise ValueError(
                f"{len(self.train_ds)} training frames cannot fill one batch of {self.cfg.batch_size} "
                f"on each of {self.engine.world_size} ranks; lower --batch-size or add data")

    def _model(self) -> None:
        from lanenb_trainer.models import build_model

        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        model = build_model(cfg.backbone, num_lanes=NUM_SLOTS, input_size=cfg.image_size, weights=cfg.weights)
        if cfg.backbone_weights and not cfg.resume:
            from lanenb_trainer.models.pretrained import load_backbone_weights

            report = load_backbone_weights(model, cfg.backbone, cfg.backbone_weights)
            if self.primary:
                self.emit.log(f"backbone weights {cfg.backbone_weights}: {len(report['loaded'])} tensors loaded, "
                              f"{len(report['skipped'])} skipped ({', '.join(report['skipped'][:4])}"
                              f"{', ...' if len(report['skipped']) > 4 else ''}), "
                              f"{len(report['missing'])} left as initialised")
        # Same init everywhere (rank 0's is broadcast anyway); a per-rank stream for dropout.
        torch.manual_seed(cfg.seed + 1 + self.rank)
        self._pending_rng: torch.Tensor | None = None
        self._pending_cuda_rng: torch.Tensor | None = None
        self._eval_loaders: dict[int, Any] = {}
        optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr * self.engine.world_size,
                                    momentum=cfg.momentum, weight_decay=cfg.weight_decay)
        self.resumed_from = None
        if cfg.resume:
            state = ckpt.load(self.run_dir / "checkpoints" / "last.pt")
            ckpt.check_compatible(state, batch_size=cfg.batch_size, world_size=self.engine.world_size,
                                  backbone=cfg.backbone, seed=cfg.seed, val_fraction=cfg.val_fraction,
                                  use_val=cfg.use_val)
            self.epoch, self.step_in_epoch = state["epoch"], state["step_in_epoch"]
            self.global_step, self.best = state["global_step"], state["best"]
            self.resumed_from = {"epoch": self.epoch, "step": self.global_step, "lr": state["lr"]}
            rng = state.get("rng_states") or []
            if len(rng) == self.engine.world_size:
                mine = rng[self.rank]  # {"cpu", "cuda"}; older checkpoints: the CPU state alone
                self._pending_rng = mine["cpu"] if isinstance(mine, dict) else mine
                self._pending_cuda_rng = mine.get("cuda") if isinstance(mine, dict) else None
            self._resume_state = state
        self.use_amp = cfg.amp and self.engine.device.type == "cuda"
        self.model, self.optimizer = self.engine.prepare(model, optimizer)
        if cfg.resume:
            # after the engine placed the model (a GPU): the optimizer state follows the parameters'
            # device on load; loaded before, a 1-rank CUDA run stepped with CPU momentum buffers
            ckpt.unwrap(self.model).load_state_dict(self._resume_state["model"])
            self.optimizer.load_state_dict(self._resume_state["optimizer"])
        self.scaler = torch.amp.GradScaler("cuda") if self.use_amp else None
        if cfg.resume and self.scaler is not None and self._resume_state.get("scaler"):
            self.scaler.load_state_dict(self._resume_state["scaler"])
        from lanenb_trainer.data.loader import build_loader

        self.train_loader = build_loader(
            self.train_ds, cfg.batch_size, rank=self.rank, world_size=self.engine.world_size,
            num_workers=cfg.loader_workers, shuffle=True, seed=cfg.seed, drop_last=True)
        self.steps_per_epoch = len(self.train_loader)
        self.total_steps = self.steps_per_epoch * cfg.epochs

    def _restore_rng(self) -> None:
        """The RNG of the checkpoint (dropout masks): CPU, and CUDA on a GPU rank."""
        torch.set_rng_state(self._pending_rng)
        if self._pending_cuda_rng is not None and self.engine.device.type == "cuda":
            torch.cuda.set_rng_state(self._pending_cuda_rng, self.engine.device)
        self._pending_rng = self._pending_cuda_rng = None

    def _to_device(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """uint8 images/masks from the loader -> normalised float images, long masks, on device."""
        dev = self.engine.device
        images = normalize_images(batch["image"].to(dev, non_blocking=True))
        mask = batch["mask"].to(dev, non_blocking=True).long()
        return images, mask, batch["exist"].to(dev, non_blocking=True)

    # -- evaluation -----------------------------------------------------------------------
    @torch.no_grad()
    def _predict(self, ds) -> tuple[list[tuple[int, dict]], float, int]:
        """This rank's shard (every world_size-th frame): TuSimple predictions and loss sum."""
        from lanenb_trainer.models.postprocess import probmaps_to_lanes

        if id(ds) not in self._eval_loaders:  # built once: workers persist between evaluations
            from lanenb_trainer.data.loader import build_eval_loader

            self._eval_loaders[id(ds)] = build_eval_loader(
                ds, self.cfg.val_batch_size, rank=self.rank, world_size=self.engine.world_size,
                num_workers=self.cfg.loader_workers)
        loader = self._eval_loaders[id(ds)]
        if loader is None:  # fewer frames than ranks: this rank joins only the collectives after
            return [], 0.0, 0
        # the plain module, not the DDP wrapper: DDP's forward broadcasts buffers, a collective a
        # rank without frames would never join (BN buffers were averaged before evaluation)
        model = ckpt.unwrap(self.model)
        self.model.eval()
        out: list[tuple[int, dict]] = []
        loss_sum, count = 0.0, 0
        dev = self.engine.device
        try:
            for batch in loader:
                t = time.perf_counter()
                images, mask, exist_t = self._to_device(batch)
                with torch.autocast(device_type=dev.type, enabled=self.use_amp):
                    seg, ex = model(images)
                loss, _, _ = scnn_loss(seg, ex, mask, exist_t)
                n = images.shape[0]
                loss_sum += float(loss) * n
                count += n
                prob = torch.softmax(seg.float(), dim=1).cpu()
                exist = torch.sigmoid(ex.float()).cpu()
                net_ms = (time.perf_counter() - t) * 1000.0 / n
                for j in range(n):
                    i = int(batch["index"][j])
                    rec = ds.records[i]
                    t1 = time.perf_counter()
                    lanes = probmaps_to_lanes(prob[j], exist[j], rec.h_samples, ds.image_size(i))
                    run_ms = net_ms + (time.perf_counter() - t1) * 1000.0
                    out.append((i, {"raw_file": rec.raw_file, "lanes": lanes, "run_time": round(run_ms, 2)}))
        finally:
            self.model.train()
        return out, loss_sum, count

    def _evaluate_local(self, ds, preds: list[tuple[int, dict]]):
        """Validation scores the lanes only: the official 200 ms rule is for the test submission
        (``test()``, ``lanenb eval``); latency is reported on its own."""
        from lanenb_trainer.evaluation.lane_eval import evaluate

        return evaluate([p for _, p in preds], [ds.records[i] for i, _ in preds], runtime_rule=False)

    def validate(self) -> dict[str, float]:
        """Distributed validation: each rank scores its shard; frame-weighted sums are all-reduced."""
        preds, loss_sum, count = self._predict(self.val_ds)
        sums = torch.zeros(5, dtype=torch.float64)
        if preds:
            r = self._evaluate_local(self.val_ds, preds)
            n = len(preds)
            sums[:4] = torch.tensor([r.accuracy * n, r.fp * n, r.fn * n, n], dtype=torch.float64)
        sums[4] = loss_sum
        sums = self.engine.allreduce_sum(sums.to(self.engine.device)).cpu()
        n = max(1.0, float(sums[3]))
        times = sorted(t for part in self.engine.gather_objects([p["run_time"] for _, p in preds]) or []
                       for t in part)
        latency = ({"latency_ms_p50": times[len(times) // 2],
                    "latency_ms_p95": times[min(len(times) - 1, int(0.95 * len(times)))]} if times else {})
        return {"accuracy": float(sums[0]) / n, "fp": float(sums[1]) / n, "fn": float(sums[2]) / n,
                "frames": int(sums[3]), "loss": float(sums[4]) / n, **latency}

    def test(self, name: str = "test") -> dict[str, Any] | None:
        """Predictions gathered on rank 0, written in TuSimple format (``predictions/<name>.json``),
        scored with the exact evaluator and the official rules (this is the submission)."""
        if self.test_ds is None:
            return None
        from lanenb_trainer.evaluation.jsonl import write_json_lines
        from lanenb_trainer.evaluation.lane_eval import evaluate

        preds, _, _ = self._predict(self.test_ds)
        gathered = self.engine.gather_objects(preds)
        if not self.primary:
            return None
        by_index = dict(p for part in gathered for p in part)
        ds = self.test_ds
        ordered = [by_index[i] for i in range(len(ds))]
        write_json_lines(self.run_dir / "predictions" / f"{name}.json", ordered)
        res = evaluate(ordered, ds.records)
        return {"accuracy": res.accuracy, "fp": res.fp, "fn": res.fn, "frames": len(ordered)}

    def test_best(self, last_test: dict[str, Any] | None) -> dict[str, Any] | None:
        """The test set scored with ``best.pt`` too (model selection is for that model). The same
        numbers when the last epoch was the best; otherwise rank 0's ``best.pt`` weights go to
        every rank for the test and the last weights come back afterwards."""
        if self.test_ds is None or self.best is None:
            return None
        if self.best.get("epoch") == self.epoch - 1 and self.status == "completed":
            return dict(last_test) if last_test is not None else None
        path = self.run_dir / "checkpoints" / "best.pt"
        model = ckpt.unwrap(self.model)
        weights = None
        if self.primary and path.is_file():
            weights = torch.load(path, map_location="cpu", weights_only=True)["model"]
        weights = self.engine.gather_objects(weights)[0]
        if weights is None:
            return None
        last = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(weights)
        try:
            return self.test("test_best")
        finally:
            model.load_state_dict(last)

    # -- checkpoints ----------------------------------------------------------------------
    def _save(self, *, best: bool) -> None:
        # every rank's RNG (dropout masks) so --resume continues bit for bit; a collective
        cuda_rng = torch.cuda.get_rng_state(self.engine.device) if self.engine.device.type == "cuda" else None
        rng_states = self.engine.gather_objects({"cpu": torch.get_rng_state(), "cuda": cuda_rng})
        if not self.primary:
            return
        state = ckpt.make_state(
            rng_states=rng_states,
            model=self.model, optimizer=self.optimizer, scaler=self.scaler, epoch=self.epoch,
            step_in_epoch=self.step_in_epoch, global_step=self.global_step, lr=self.lr,
            best=self.best, config=self.cfg.to_dict(), world_size=self.engine.world_size,
            model_args={"backbone": self.cfg.backbone, "num_lanes": NUM_SLOTS,
                        "input_size": list(self.cfg.image_size)})
        path = ckpt.save_atomic(state, self.run_dir / "checkpoints" / "last.pt")
        self.emit("checkpoint", path=str(path), epoch=self.epoch, step=self.global_step, best=False)
        if best:
            path = ckpt.save_atomic(state, self.run_dir / "checkpoints" / "best.pt")
            self.emit("checkpoint", path=str(path), epoch=self.epoch, step=self.global_step, best=True)

    # -- the loop -------------------------------------------------------------------------
    def _train_epoch(self) -> bool:
        """Train until the epoch ends (True) or --max-steps is reached (False)."""
        cfg, eng = self.cfg, self.engine
        dev = eng.device
        self.train_ds.set_epoch(self.epoch)
        sampler = self.train_loader.sampler
        sampler.set_epoch(self.epoch)
        sampler.set_start_index(self.step_in_epoch * cfg.batch_size)
        loss_sum = torch.zeros(2, dtype=torch.float64)
        win_loss, win_seg, win_ex, win_n, win_t = 0.0, 0.0, 0.0, 0, time.perf_counter()
        epoch_t = time.perf_counter()
        images_seen = 0
        # Creating the iterator draws from the RNG: an epoch-end checkpoint was taken before
        # that draw, a mid-epoch one after it.
        if self._pending_rng is not None and self.step_in_epoch == 0:
            self._restore_rng()
        batches = iter(self.train_loader)
        if self._pending_rng is not None:
            self._restore_rng()
        for batch in batches:
            if self.fault_step is not None and self.global_step >= self.fault_step:
                raise RuntimeError(f"injected fault on rank {self.rank} at step {self.global_step} "
                                   f"({FAULT_RANK_VAR}/{FAULT_STEP_VAR})")
            self.lr = lr_at(self.global_step, cfg, eng.world_size, self.total_steps)
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr
            images, mask, exist = self._to_device(batch)
            with torch.autocast(device_type=dev.type, enabled=self.use_amp):
                seg, ex = self.model(images)
            loss, seg_l, ex_l = scnn_loss(seg, ex, mask, exist)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss is {float(loss)} at step {self.global_step}: "
                                         f"lower --lr (now {cfg.lr} per rank)")
            eng.backward_step(loss, self.optimizer, self.scaler)
            self.global_step += 1
            self.step_in_epoch += 1
            lv = float(loss.detach())
            loss_sum += torch.tensor([lv, 1.0], dtype=torch.float64)
            win_loss += lv
            win_seg += float(seg_l)
            win_ex += float(ex_l)
            win_n += 1
            images_seen += images.shape[0]
            last = self.step_in_epoch == self.steps_per_epoch
            stop = bool(cfg.max_steps) and self.global_step >= cfg.max_steps
            if self.primary and (self.global_step % cfg.log_every == 0 or last or stop):
                dt = time.perf_counter() - win_t
                self.emit("step", epoch=self.epoch, step=self.global_step, epoch_step=self.step_in_epoch,
                          steps_per_epoch=self.steps_per_epoch, total_steps=self.total_steps,
                          loss=win_loss / win_n, seg_loss=win_seg / win_n, exist_loss=win_ex / win_n,
                          lr=self.lr, images_per_s=win_n * cfg.batch_size * eng.world_size / max(dt, 1e-9),
                          step_time_s=dt / win_n)
                win_loss, win_seg, win_ex, win_n, win_t = 0.0, 0.0, 0.0, 0, time.perf_counter()
            if stop:
                return False
        total = eng.allreduce_sum(loss_sum.to(dev)).cpu()
        dt = time.perf_counter() - epoch_t
        self.epoch_summary = {"train_loss": float(total[0] / max(1.0, float(total[1]))),
                              "duration_s": round(dt, 3),
                              "images_per_s": images_seen * eng.world_size / max(dt, 1e-9)}
        return True

    def fit(self) -> dict[str, Any] | None:
        cfg = self.cfg
        self._datasets()
        self._model()
        desc = self.engine.describe()
        self.emit("start", config=cfg.to_dict(), world_size=self.engine.world_size, engine=self.engine.name,
                  device=desc["device"], threads=desc["threads"], local_rank=self.engine.local_rank,
                  local_size=self.engine.local_size, pid=os.getpid(), host=os.uname().nodename,
                  train_frames=len(self.train_ds), val_frames=len(self.val_ds) if self.val_ds else 0,
                  test_frames=len(self.test_ds) if self.test_ds else 0,
                  steps_per_epoch=self.steps_per_epoch, total_steps=self.total_steps,
                  parameters=sum(p.numel() for p in self.model.parameters()), amp=self.use_amp,
                  resumed_from=self.resumed_from)
        if self.monitor is not None:
            self.monitor.start()
        if self.primary and not cfg.resume:
            write_json(self.run_dir / "config.json", {
                **cfg.to_dict(), "world_size": self.engine.world_size, "engine": self.engine.name,
                "steps_per_epoch": self.steps_per_epoch, "total_steps": self.total_steps})
        self.model.train()
        completed = True
        while self.epoch < cfg.epochs:
            if self.step_in_epoch >= self.steps_per_epoch:  # resumed exactly at an epoch end
                self.epoch, self.step_in_epoch = self.epoch + 1, 0
                continue
            if cfg.max_steps and self.global_step >= cfg.max_steps:  # resumed at the limit already
                completed = False
                break
            finished = self._train_epoch()
            sync_buffers(self.model, self.engine)
            if not finished:
                completed = False
                self._save(best=False)
                break
            summary = dict(self.epoch_summary)
            metric: dict[str, Any] = {}
            if self.val_ds is not None:
                metric = self.validate()
                if self.primary:
                    self.emit("eval", split="val", epoch=self.epoch, step=self.global_step, **metric)
                improved = self.best is None or metric["accuracy"] > self.best["accuracy"]
            else:
                improved = self.best is None or summary["train_loss"] < self.best["train_loss"]
            if self.primary:
                self.emit("epoch", epoch=self.epoch, step=self.global_step, epochs=cfg.epochs, lr=self.lr,
                          **summary, **({f"val_{k}": v for k, v in metric.items()}))
            if improved:
                self.best = {"epoch": self.epoch, "step": self.global_step, **summary,
                             **{k: metric[k] for k in ("accuracy", "fp", "fn") if k in metric}}
            self.epoch, self.step_in_epoch = self.epoch + 1, 0
            # the saved position is "start of the next epoch"; best.pt shares the state
            self._save(best=improved)
        self.status = "completed" if completed else "stopped"
        test = self.test()
        test_best = self.test_best(test)
        if self.primary:
            # the headline is the selected model's (best.pt) when there is one, else the last model's
            chosen = test_best if test_best is not None else test
            headline = {k: (chosen or {}).get(k) for k in ("accuracy", "fp", "fn")}
            metrics = {**headline, "headline_model": "best.pt" if test_best is not None else "last model",
                       "best_epoch": (self.best or {}).get("epoch"),
                       "models": {"test": f"last model (after epoch {self.epoch - 1}, step {self.global_step})",
                                  "test_best": (f"best.pt (epoch {(self.best or {}).get('epoch')})"
                                                if test_best is not None else None)},
                       "status": self.status, "test": test, "test_best": test_best, "best": self.best,
                       "epochs": self.epoch,
                       "steps": self.global_step, "world_size": self.engine.world_size,
                       "engine": self.engine.name, "duration_s": round(time.time() - self.t0, 3)}
            write_json(self.run_dir / "metrics.json", metrics)
            if test is not None:
                self.emit("eval", split="test", epoch=self.epoch, step=self.global_step, model="last", **test)
            if test_best is not None:
                self.emit("eval", split="test", epoch=(self.best or {}).get("epoch"), step=self.global_step,
                          model="best", **test_best)
        return test

    def snapshot(self) -> None:
        """ENABLE_SNAPSHOT: rank 0 snapshots the data/model PVC after a successful run, as the
        RUN:AI guide did, with the pod's service account (``lanenb_trainer.k8s_snapshot``:
        nothing depends on the notebook kernel still running). Reports a ``snapshot`` event with
        ``status`` ``created`` or ``failed``; a failed snapshot never fails the run."""
        if not (self.primary and self.cfg.enable_snapshot):
            return
        from lanenb_trainer import __version__
        from lanenb_trainer.k8s_snapshot import create_pvc_snapshot

        job = os.environ.get("LANENB_JOB_NAME") or self.run_dir.name
        labels: dict[str, Any] = {"role": "volume", "code": __version__}
        accuracy = (self.best or {}).get("accuracy")
        try:
            accuracy = json.loads((self.run_dir / "metrics.json").read_text()).get("accuracy", accuracy)
        except (OSError, ValueError, AttributeError):
            pass
        if isinstance(accuracy, (int, float)) and not isinstance(accuracy, bool):
            labels["accuracy"] = f"{accuracy:.4f}"
        result = create_pvc_snapshot(self.cfg.pvc_name, job, labels=labels)
        self.emit("snapshot", pvc_name=self.cfg.pvc_name, job=job, run_dir=str(self.run_dir), **result.fields())


def _ranks_before_engine() -> tuple[int, int]:
    """(rank, world size) from the launcher, before any engine exists: only to report a bad
    config once and to know whether peers wait on us. Never raises; the engine validates."""
    from lanenb_trainer.engines.ddp import ranks_from_env

    try:
        rank, world, _, _ = ranks_from_env()
    except EngineError:
        return 0, 1
    return rank, world


def _on_signal(signum, _frame):
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
        return 2
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    trainer: Trainer | None = None
    monitor: SystemMonitor | None = None
    t0 = time.time()
    try:
        engine = get_engine(cfg.engine, collective_timeout=cfg.collective_timeout).init()
        rank, world = engine.rank, engine.world_size
        trainer = Trainer(cfg, engine)
        gpu = engine.device.index if engine.device.type == "cuda" else None
        monitor = trainer.monitor = SystemMonitor(trainer.emit, rank, interval=cfg.system_interval, gpu_index=gpu)
        test = trainer.fit()
        trainer.snapshot()
        monitor.stop()
        trainer.emit("end", status=trainer.status, duration_s=round(time.time() - t0, 3),
                     epoch=trainer.epoch, step=trainer.global_step, lr=trainer.lr, best=trainer.best,
                     test=test, param_checksum=param_checksum(trainer.model),
                     state_checksum=param_checksum(trainer.model, buffers=True))
        engine.barrier()
        trainer.emit.close()
        engine.shutdown()
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the event stream
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
            code = 130 if cancelled else 1
            if world > 1:
                # Peers may be blocked in a collective with us: exit now, without running
                # atexit/teardown that could itself block, so mpirun tears the world down.
                os._exit(code)
        return code
