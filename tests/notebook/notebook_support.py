"""Helpers of the notebook tests (a uniquely named module: each test folder has its own conftest,
so tests import helpers from here, never ``from conftest import``)."""

from __future__ import annotations

import json
from pathlib import Path


def run_script(steps: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in steps))
    return path


def training_script(steps: int = 6, world: int = 2, epochs: int = 2, sleep: float = 0.05,
                    fail_rank: int | None = None, scale: float = 1.0,
                    timing: dict[int, dict[str, float]] | None = None) -> list[dict]:
    """Events shaped like the trainer's (docs/EVENTS.md) for ``world`` ranks; with ``timing``
    (rank -> per-step seconds of ``data_s``, ``compute_s``, ``exchange_s``), every rank also
    reports a ``timing`` window every 2 steps from host ``node-<rank>``."""
    out: list[dict] = []
    per_epoch = max(1, steps // epochs)
    for r in range(world):
        out.append({"rank": r, "event": {"kind": "start", "world_size": world, "engine": "ddp", "device": "cpu",
                                         "config": {"batch_size": 4, "epochs": epochs, "backbone": "small"},
                                         "total_steps": steps, "steps_per_epoch": per_epoch, "train_frames": 40}})
        out.append({"rank": r, "line": f"plain output of rank {r}"})
    for s in range(1, steps + 1):
        out.append({"rank": 0, "sleep": sleep, "event": {"kind": "step", "epoch": (s - 1) // per_epoch, "step": s,
                                                         "total_steps": steps, "loss": scale * (2.0 / s),
                                                         "lr": 0.01, "images_per_s": 100.0 * scale}})
        for r in range(world):
            out.append({"rank": r, "event": {"kind": "system", "cpu_percent": 50.0 + r, "rss_mb": 300.0 + r}})
        if timing and s % 2 == 0:
            for r, parts in timing.items():
                window = {"data_s": 0.0, "h2d_s": 0.0, "compute_s": 0.0, "exchange_s": 0.0, "optimizer_s": 0.0,
                          **parts}
                out.append({"rank": r, "event": {"kind": "timing", "step": s, "steps": 2, "host": f"node-{r}",
                                                 "device": "cpu", "step_s": sum(window.values()), "other_s": 0.0,
                                                 "pause_s": 0.0, "pause": [], **window}})
        if s % per_epoch == 0:
            e = s // per_epoch - 1
            out.append({"rank": 0, "event": {"kind": "epoch", "epoch": e, "epochs": epochs, "step": s,
                                             "train_loss": 1.0 / (e + 1), "val_accuracy": 0.5 + 0.2 * e,
                                             "val_fp": 0.1, "val_fn": 0.2}})
    if fail_rank is not None:
        out.append({"rank": fail_rank, "event": {"kind": "error", "type": "RuntimeError", "message": "loss is NaN"}})
        out.append({"rank": fail_rank, "line": "Traceback (most recent call last):"})
        out.append({"rank": fail_rank, "exit": 3})
        return out
    out.append({"rank": 0, "event": {"kind": "eval", "split": "test", "accuracy": 0.91 * scale, "fp": 0.05,
                                     "fn": 0.04, "frames": 12}})
    for r in range(world):
        out.append({"rank": r, "event": {"kind": "end", "status": "completed", "step": steps, "duration_s": 1.0}})
    return out
