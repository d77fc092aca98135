"""A finished 2-rank run recorded without training: its ``job.log`` holds the events the trainer
writes (start, steps, every rank's ``timing`` windows, the two test evaluations, the end) and the
registry a succeeded local job, so the sidebar's list, the job panel and ``%lanejobs`` show it as
a real run's: the headline with its model label and the doctor's verdict, in seconds.

Why not train: the browser tests of a row's layout need its words (a headline, a long verdict),
not a model; a real run takes a minute and its verdict changes with the machine's load.
"""

from __future__ import annotations

from pathlib import Path

from load_jobs import record_job

from lanenb_trainer.events import format_event
from lanenb_trainer.ranktag import tag_line

__all__ = ["record_finished_run"]

RANKS = 2
STEPS_PER_WINDOW = 10


def _line(kind: str, rank: int = 0, **fields) -> str:
    return tag_line(rank, "stdout", format_event(kind, rank, **fields))


def _timing(rank: int, step: int, *, step_s: float, data_share: float) -> str:
    """One rank's window: ``data_share`` of each step waiting for data, the rest mostly compute."""
    data = step_s * data_share
    exchange = step_s * 0.05
    compute = step_s - data - exchange - 0.002
    return _line("timing", rank, step=step, steps=STEPS_PER_WINDOW, host="node-a", device="cpu", step_s=step_s,
                 other_s=0.0, pause_s=0.0, pause=[], data_s=data, h2d_s=0.001, compute_s=compute,
                 exchange_s=exchange, optimizer_s=0.001)


def record_finished_run(home: Path, name: str, *, best: float, last: float, epochs: int = 10,
                        data_share: float = 0.1, workers: int = 2, created: float = 1000.0) -> Path:
    """Record the succeeded run ``name`` in ``home``'s registry; returns its run dir.

    Args:
        best: best.pt's test accuracy (the headline), reached at epoch ``epochs - 2``.
        last: the last model's test accuracy.
        data_share: the share of each step the ranks waited for data (0.1: ``healthy``; from
            0.25 on the doctor says ``input-bound`` and names ``workers`` -> more).
    """
    row = record_job(home, name, state="succeeded", created=created, finished=created + 60.0,
                     running_here=False)
    steps = epochs * STEPS_PER_WINDOW * 2
    lines = [_line("start", r, world_size=RANKS, total_steps=steps, engine="ddp", device="cpu", host="node-a",
                   config={"batch_size": 4, "epochs": epochs, "num_workers": workers, "use_workers": True})
             for r in range(RANKS)]
    for step in range(STEPS_PER_WINDOW, steps + 1, STEPS_PER_WINDOW):
        lines.append(_line("step", step=step, total_steps=steps, epoch=step * epochs // steps, loss=1.0 / step,
                           lr=0.02))
        lines += [_timing(r, step, step_s=0.5, data_share=data_share) for r in range(RANKS)]
    lines.append(_line("eval", split="test", model="best", epoch=epochs - 2, accuracy=best, fp=0.05, fn=0.04,
                       frames=40))
    lines.append(_line("eval", split="test", model="last", epoch=epochs, accuracy=last, fp=0.06, fn=0.05,
                       frames=40))
    lines.append(_line("end", status="succeeded", step=steps, duration_s=60.0))
    run_dir = Path(row["run_dir"])
    (run_dir / "job.log").write_text("\n".join(lines) + "\n")
    return run_dir
