"""Scoring during a run: distributed validation each epoch, and the TuSimple test submission.

Every rank scores its shard (every ``world_size``-th frame); validation all-reduces
frame-weighted sums, the test gathers the predictions on rank 0, which writes them in TuSimple
format and scores them with the exact evaluator and the official rules.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from lanenb_trainer import checkpoint as ckpt
from lanenb_trainer.config import TrainConfig
from lanenb_trainer.engines import Engine
from lanenb_trainer.recipe import scnn_loss
from lanenb_trainer.training.batches import to_device
from lanenb_trainer.training.precision import Precision

__all__ = ["Evaluator"]

Prediction = tuple[int, dict]  # (frame index in the split, TuSimple prediction record)


class Evaluator:
    """Scores a model on a split with this rank's shard; the eval loaders (and their workers)
    are built on first use and kept for the next evaluation."""

    def __init__(self, cfg: TrainConfig, engine: Engine, *, precision: Precision) -> None:
        self.cfg = cfg
        self.engine = engine
        self.precision = precision
        self._loaders: dict[int, Any] = {}

    @torch.no_grad()
    def predict(self, model: torch.nn.Module, ds: Any) -> tuple[list[Prediction], float, int]:
        """This rank's shard: TuSimple predictions, the loss summed over frames, the frame count."""
        from lanenb_trainer.models.postprocess import probmaps_to_lanes

        if id(ds) not in self._loaders:  # built once: workers persist between evaluations
            from lanenb_trainer.data.loader import build_eval_loader

            self._loaders[id(ds)] = build_eval_loader(
                ds, self.cfg.val_batch_size, rank=self.engine.rank, world_size=self.engine.world_size,
                num_workers=self.cfg.loader_workers)
        loader = self._loaders[id(ds)]
        if loader is None:  # fewer frames than ranks: this rank joins only the collectives after
            return [], 0.0, 0
        # the plain module, not the DDP wrapper: DDP's forward broadcasts buffers, a collective a
        # rank without frames would never join (BN buffers were averaged before evaluation)
        bare = ckpt.unwrap(model)
        model.eval()
        out: list[Prediction] = []
        loss_sum, count = 0.0, 0
        dev = self.engine.device
        try:
            for batch in loader:
                t = time.perf_counter()
                images, mask, exist_t = to_device(batch, dev)
                images = self.precision.batch(images)
                with self.precision.autocast():
                    seg, ex = bare(images)
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
            model.train()
        return out, loss_sum, count

    def validate(self, model: torch.nn.Module, ds: Any) -> dict[str, Any]:
        """Distributed validation: each rank scores its shard; frame-weighted sums are all-reduced.

        Validation scores the lanes only: the official 200 ms rule is for the test submission
        (:meth:`test`, ``lanenb eval``); latency is reported on its own.
        """
        from lanenb_trainer.evaluation.lane_eval import evaluate, latency_ms

        preds, loss_sum, _ = self.predict(model, ds)
        sums = torch.zeros(5, dtype=torch.float64)
        if preds:
            r = evaluate([p for _, p in preds], [ds.records[i] for i, _ in preds], runtime_rule=False)
            n = len(preds)
            sums[:4] = torch.tensor([r.accuracy * n, r.fp * n, r.fn * n, n], dtype=torch.float64)
        sums[4] = loss_sum
        sums = self.engine.allreduce_sum(sums.to(self.engine.device)).cpu()
        frames = max(1.0, float(sums[3]))
        latency = latency_ms(t for part in self.engine.gather_objects([p["run_time"] for _, p in preds]) or []
                             for t in part)
        return {"accuracy": float(sums[0]) / frames, "fp": float(sums[1]) / frames,
                "fn": float(sums[2]) / frames, "frames": int(sums[3]), "loss": float(sums[4]) / frames, **latency}

    def test(self, model: torch.nn.Module, ds: Any, run_dir: Path, name: str = "test") -> dict[str, Any] | None:
        """Predictions gathered on rank 0, written in TuSimple format (``predictions/<name>.json``,
        each frame's measured ``run_time``: the submission), scored with the exact evaluator:
        the lanes alone as the headline, the official 200 ms rule beside it (``test_scores``).
        A collective; the scores on rank 0, None elsewhere."""
        from lanenb_trainer.evaluation.jsonl import write_json_lines
        from lanenb_trainer.evaluation.lane_eval import test_scores

        preds, _, _ = self.predict(model, ds)
        gathered = self.engine.gather_objects(preds)
        if not self.engine.is_primary:
            return None
        by_index = dict(p for part in gathered for p in part)
        ordered = [by_index[i] for i in range(len(ds))]
        write_json_lines(run_dir / "predictions" / f"{name}.json", ordered)
        return test_scores(ordered, ds.records)

    def test_best(self, model: torch.nn.Module, ds: Any, run_dir: Path) -> dict[str, Any] | None:
        """The test set scored with ``best.pt`` (model selection is for that model): rank 0's
        ``best.pt`` weights go to every rank for the test, the last weights come back afterwards.
        A collective; None when there is no ``best.pt``."""
        path = run_dir / "checkpoints" / "best.pt"
        bare = ckpt.unwrap(model)
        weights = None
        if self.engine.is_primary and path.is_file():
            weights = torch.load(path, map_location="cpu", weights_only=True)["model"]
        weights = self.engine.gather_objects(weights)[0]
        if weights is None:
            return None
        last = {k: v.detach().clone() for k, v in bare.state_dict().items()}
        bare.load_state_dict(weights)
        try:
            return self.test(model, ds, run_dir, "test_best")
        finally:
            bare.load_state_dict(last)
