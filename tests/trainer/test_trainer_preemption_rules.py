"""The rules behind preemption and automatic resume, one process each (no mpirun): which
checkpoint a run continues from, how restarts are counted, which exit statuses a launcher
restarts after, and that a SIGTERM only sets a flag."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from lanenb_trainer import checkpoint as ckpt
from lanenb_trainer import exitcodes
from lanenb_trainer.config import ConfigError, TrainConfig, parse_config
from lanenb_trainer.engines.ddp import DDPEngine
from lanenb_trainer.training.attempts import ProgressMark, forget_resumes, reached_step, record_resume
from lanenb_trainer.training.preempt import Preemption
from lanenb_trainer.training.resume import EpochTally, last_checkpoint, read_resume_point, resume_state


def _write_checkpoint(run_dir: Path, *, run_id: str | None, world_size: int = 1) -> None:
    model = torch.nn.Linear(2, 2)
    state = ckpt.make_state(
        model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), scaler=None, epoch=1, step_in_epoch=2,
        global_step=6, lr=0.1, best=None, world_size=world_size, preempted=True,
        config={"batch_size": 4, "backbone": "small", "seed": 0, "val_fraction": 0.1, "use_val": True,
                "run_id": run_id},
        rng_states=[{"cpu": torch.get_rng_state(), "cuda": None}] * world_size,
        epoch_tallies=[EpochTally(1.25, 2.0, 8, 3.5).to_list()] * world_size)
    ckpt.save_atomic(state, last_checkpoint(run_dir))


def _cfg(run_dir: Path, **kw) -> TrainConfig:
    return TrainConfig(data=str(run_dir), run_dir=str(run_dir), **kw)


def test_a_run_continues_its_own_checkpoint_without_resume_and_never_another_runs(tmp_path):
    _write_checkpoint(tmp_path, run_id="lane-a")
    assert resume_state(_cfg(tmp_path), tmp_path) is None  # no --run-id: only --resume continues
    assert resume_state(_cfg(tmp_path, run_id="lane-b"), tmp_path) is None  # a new job in a reused run dir
    state, automatic = resume_state(_cfg(tmp_path, run_id="lane-a"), tmp_path)  # the launcher started it again
    assert automatic and state["global_step"] == 6
    state, automatic = resume_state(_cfg(tmp_path, run_id="lane-b", resume=True), tmp_path)
    assert not automatic and state["global_step"] == 6  # --resume takes whatever run wrote it
    assert resume_state(_cfg(tmp_path / "empty", run_id="lane-a"), tmp_path / "empty") is None


def test_the_resume_point_carries_the_epochs_sums_and_the_preemption(tmp_path):
    _write_checkpoint(tmp_path, run_id="lane-a", world_size=2)
    point = read_resume_point(_cfg(tmp_path, run_id="lane-a", batch_size=4), tmp_path, rank=1, world_size=2,
                              automatic=True)
    assert (point.epoch, point.step_in_epoch, point.global_step) == (1, 2, 6)
    assert point.tally == EpochTally(1.25, 2.0, 8, 3.5) and point.preempted and point.automatic
    assert EpochTally.from_list(None) is None and EpochTally.from_list([1.0]) is None  # older checkpoints


def test_restarts_count_the_steps_taken_again(tmp_path):
    mark = ProgressMark(tmp_path)
    mark.mark(1047)
    mark.mark(47)  # overwritten in place: no digits of the longer number are left behind
    assert reached_step(tmp_path) == 47
    first = record_resume(tmp_path, step=40, epoch=3, preempted=False, automatic=True)
    assert (first["count"], first["steps_lost"], first["steps_lost_total"], first["reached"]) == (1, 7, 7, 47)
    mark.mark(40)  # preempted right at its checkpoint: nothing lost
    second = record_resume(tmp_path, step=40, epoch=3, preempted=True, automatic=True)
    assert (second["count"], second["steps_lost"], second["steps_lost_total"]) == (2, 0, 7)
    assert second["preempted"]  # resumed from another checkpoint (none named: older runs)
    mark.mark(43)  # a preemption at its checkpoint, resumed, then a rank killed 3 steps later
    third = record_resume(tmp_path, step=40, epoch=3, preempted=True, automatic=True, checkpoint=1.5)
    fourth = record_resume(tmp_path, step=40, epoch=3, preempted=True, automatic=True, checkpoint=1.5)
    assert (third["preempted"], fourth["preempted"], fourth["steps_lost"]) == (True, False, 3)
    fifth = record_resume(tmp_path, step=40, epoch=3, preempted=True, automatic=True, checkpoint=2.5)
    assert fifth["preempted"]  # preempted again at once, before a step: a new checkpoint says so
    mark.close()
    forget_resumes(tmp_path)  # a run from step 0 in this run dir counts anew
    assert record_resume(tmp_path, step=40, epoch=3, preempted=True, automatic=False)["count"] == 1


@pytest.mark.parametrize("code,restart", [
    (exitcodes.PREEMPTED, True), (137, True), (143, True), (-9, True),  # preempted, a rank or mpirun killed
    (0, False), (exitcodes.FAILED, False), (exitcodes.CONFIG, False),  # done, an error, a bad flag
    (exitcodes.CANCELLED, False), (-2, False),  # Ctrl-C is a person stopping the run
])
def test_a_launcher_restarts_after_a_preemption_or_a_kill_only(code, restart):
    assert exitcodes.restartable(code) is restart


def test_run_id_must_name_something(tmp_path):
    with pytest.raises(ConfigError, match=r"--run-id '': must be a non-empty name"):
        parse_config(["--data", str(tmp_path), "--run-dir", str(tmp_path / "r"), "--run-id", ""], env={})
    assert parse_config(["--data", str(tmp_path), "--run-dir", str(tmp_path / "r"), "--run-id", "lane-a"],
                        env={}).run_id == "lane-a"


def test_sigterm_only_asks_and_the_ranks_agree_at_a_step_boundary(monkeypatch):
    for var in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    engine = DDPEngine().init()  # one rank: the collectives are local
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGUSR1)}
    try:
        preemption = Preemption().install()
        preemption.begin_step(engine)
        assert preemption.end_step(engine) is None
        os.kill(os.getpid(), signal.SIGTERM)  # the process lives on: the handler only notes it
        assert preemption.requested and preemption.signal_name == "SIGTERM"
        preemption.begin_step(engine)
        (t,) = preemption.end_step(engine)
        assert t == preemption.signalled_at and preemption.names == ["SIGTERM"]
        assert preemption.agree(engine) == [t]
        relayed = Preemption().install()  # what mpirun passes on to every rank (the MPIJob launcher's)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert relayed.agree(engine) == [relayed.signalled_at] and relayed.names == ["SIGUSR1"]
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _damage(path: Path) -> None:
    """Random bytes inside the records (this test's checkpoint is small: 64 bytes, a quarter in)."""
    data = bytearray(path.read_bytes())
    at = len(data) // 4
    data[at:at + 64] = os.urandom(64)
    path.write_bytes(bytes(data))


def test_a_damaged_checkpoint_is_caught_and_best_pt_stands_in_saying_so(tmp_path):
    """Issue 51: 4 KiB of random bytes in last.pt were resumed silently (then "loss is nan ...
    lower --lr"); a truncated one started and failed later. The CRC-32s torch's zip already
    carries are checked; best.pt takes over with the reason, or the resume is refused."""
    from lanenb_trainer.training.resume import DAMAGED_NOTE

    _write_checkpoint(tmp_path, run_id="lane-a")
    last = last_checkpoint(tmp_path)
    ckpt.save_atomic(ckpt.load(last) | {"global_step": 3}, last.with_name("best.pt"))
    _damage(last)
    with pytest.raises(ckpt.DamagedCheckpointError, match=r"last\.pt is damaged: its record .* fails its CRC-32"):
        ckpt.load(last)
    state, _automatic = resume_state(_cfg(tmp_path, run_id="lane-a"), tmp_path)
    assert state["global_step"] == 3 and "continuing from best.pt instead (step 3" in state[DAMAGED_NOTE]
    last.write_bytes(last.read_bytes()[:1000])  # cut short
    last.with_name("best.pt").unlink()
    with pytest.raises(ckpt.DamagedCheckpointError, match=r"cut short .*no good best\.pt beside it"):
        resume_state(_cfg(tmp_path, run_id="lane-a"), tmp_path)


def test_a_checkpoint_that_does_not_fit_names_the_disk_and_the_space_needed(tmp_path, monkeypatch):
    """Issue 51: a full disk during a checkpoint ended with torch's "[enforce fail at
    inline_container.cc:672] . unexpected pos ..." and no word of disk space."""
    import shutil as _shutil
    from collections import namedtuple

    def full(*_a, **_k):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")

    monkeypatch.setattr(ckpt.torch, "save", full)  # what torch raises on a full disk (ENOSPC inside its writer)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(_shutil, "disk_usage", lambda _p: usage(10 * 2**20, 10 * 2**20, 2 * 2**20))
    state = {"model": {"w": torch.zeros(1024, 1024)}}  # 4 MiB of tensors, 2 MiB free
    with pytest.raises(ckpt.DiskFullError, match=r"the disk of .* is full \(2 MiB free; this checkpoint needs "
                                                  r"about 4 MiB\)"):
        ckpt.save_atomic(state, tmp_path / "checkpoints" / "last.pt")
    assert list((tmp_path / "checkpoints").iterdir()) == []  # nothing half-written left
