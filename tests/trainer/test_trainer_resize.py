"""Resize on resume: a checkpoint written by 2 ranks continued on 1 (training/resize.py)."""

from __future__ import annotations

import shutil

import pytest
import torch
from trainer_support import dump, events_of, run_ranks, train_args

from lanenb_trainer import checkpoint as ckpt
from lanenb_trainer import exitcodes
from lanenb_trainer.config import TrainConfig
from lanenb_trainer.data.loader import ResumableDistributedSampler
from lanenb_trainer.training.accumulate import Accumulator
from lanenb_trainer.training.resize import ResizeError, plan_resize, rule_factor

RUN = dict(epochs=2, lr=0.02, engine="ddp", run_id="lane-resize")
# 2 ranks x batch 4 = 8 images per step, 4 steps per epoch on the tiny synthetic set


# -- the sampler, the plan and the accumulator: no ranks -------------------------------------
@pytest.mark.parametrize("before, after, steps_done, batch_after", [(2, 1, 3, 4), (2, 3, 2, 2), (1, 2, 5, 1)])
def test_a_resized_epoch_sees_every_sample_once(before, after, steps_done, batch_after):
    n, batch_before = 53, 2
    position = steps_done * before * batch_before  # what the checkpoint records: samples all ranks consumed
    seen = []
    for rank in range(before):
        s = ResumableDistributedSampler(range(n), num_replicas=before, rank=rank, seed=7, drop_last=True)
        s.set_epoch(4)
        seen += list(s)[: steps_done * batch_before]
    rest = []
    for rank in range(after):
        s = ResumableDistributedSampler(range(n), num_replicas=after, rank=rank, seed=7, drop_last=True)
        s.set_epoch(4)
        s.set_start_position(position)
        share = len(s)
        mine = list(s)
        assert len(mine) == share == (s.total_size - position) // after  # the same share on every rank
        rest += mine
    assert not set(seen) & set(rest) and len(set(rest)) == len(rest)  # no sample twice
    # none skipped: the N ranks take the rest of the epoch's one order (seed + epoch), all of it
    # but the fewer-than-N samples that would leave a rank one short (an epoch drops those anyway)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(7 + 4)).tolist()
    assert seen + rest != order and set(seen + rest) == set(order[: len(seen) + len(rest)])
    assert 0 <= (n // after) * after - len(seen) - len(rest) < after


def test_the_same_size_resumes_as_before():
    s = ResumableDistributedSampler(range(20), num_replicas=2, rank=1, seed=0)
    s.set_epoch(1)
    full = list(s)
    s.set_start_position(8)  # 4 per rank
    assert s.start_index == 4 and list(s) == full[4:]


def _state(world: int, batch: int, **extra):
    m = torch.nn.Linear(2, 2)
    return ckpt.make_state(model=m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1), scaler=None, epoch=0,
                           step_in_epoch=2, global_step=2, lr=0.1, best=None, world_size=world,
                           config={"batch_size": batch, "backbone": "small", "seed": 0, "epochs": 2}, **extra)


def test_a_resize_keeps_the_global_batch_by_accumulation_or_is_refused_naming_the_numbers(tmp_path):
    cfg = TrainConfig(data=str(tmp_path), run_dir=str(tmp_path), batch_size=4)
    plan = plan_resize(_state(2, 4), cfg, 1)
    assert (plan.resized, plan.accumulation, plan.global_batch, plan.factor) == (True, 2, 8, 1.0)
    assert plan.describe()["from"] == 2 and plan.describe()["to"] == 1 and plan.describe()["lr_rule"] is None
    assert not plan_resize(_state(2, 4), cfg, 2).resized
    with pytest.raises(ResizeError) as info:
        plan_resize(_state(2, 4), cfg, 3)
    message = str(info.value)
    assert "global batch is 8 images per step (2 rank(s) x batch 4)" in message
    assert "3 rank(s) x batch 4 = 12 does not divide it" in message and "--resize-lr-rule linear|sqrt|keep" in message
    with pytest.raises(ResizeError, match="use --batch-size 1 on 8 rank"):
        plan_resize(_state(2, 4), TrainConfig(data="d", run_dir="r", batch_size=3), 8)


def test_an_lr_rule_trains_at_the_new_global_batch():
    state = _state(2, 4)
    for rule, factor in (("linear", 0.5), ("sqrt", 0.5 ** 0.5), ("keep", 1.0)):
        plan = plan_resize(state, TrainConfig(data="d", run_dir="r", batch_size=4, resize_lr_rule=rule), 1)
        assert (plan.accumulation, plan.global_batch, plan.lr_rule) == (1, 4, rule)
        assert plan.factor == pytest.approx(factor)
    with pytest.raises(ResizeError, match="LR rule 'cubic' is not one of linear, sqrt, keep"):
        rule_factor(2.0, "cubic")


def test_accumulated_micro_batches_give_the_whole_batchs_gradient():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    x, y = torch.randn(8, 5), torch.randn(8, 1)
    whole = torch.nn.functional.mse_loss(model(x), y)
    expected = torch.autograd.grad(whole, list(model.parameters()))
    acc = Accumulator(2, list(model.parameters()))
    loss = torch.nn.functional.mse_loss(model(x[:4]), y[:4])
    acc.add(loss, torch.stack([loss.detach()] * 3))
    assert all(p.grad is None for p in model.parameters())  # held here, no .grad: no engine hook fired
    last = torch.nn.functional.mse_loss(model(x[4:]), y[4:])
    acc.step_loss(last).backward()
    for p, g in zip(model.parameters(), expected):
        torch.testing.assert_close(p.grad, g)
    assert float(acc.step_parts(torch.stack([last.detach()] * 3))[0]) == pytest.approx(float(whole.detach()))


# -- real ranks: 2 ranks preempted, continued on 1 -------------------------------------------
@pytest.fixture(scope="module")
def preempted(synth_root, tmp_path_factory):
    """An uninterrupted 2-rank run, and the same run preempted after 2 steps (mid-epoch)."""
    reference = tmp_path_factory.mktemp("resize-reference")
    code, lines = run_ranks(2, train_args(synth_root, reference, **RUN))
    assert code == 0, dump(lines)
    cut = tmp_path_factory.mktemp("resize-cut")
    code, first = run_ranks(2, train_args(synth_root, cut, **RUN), extra_env={
        "LANENB_FAULT_RANK": "1", "LANENB_FAULT_STEP": "1", "LANENB_FAULT_SIGNAL": "TERM"})
    assert code == exitcodes.PREEMPTED, dump(first)
    return reference, lines, cut


def _continue(synth_root, preempted, tmp_path, processes=1, **overrides):
    run_dir = tmp_path / "run"
    shutil.copytree(preempted[2], run_dir)
    return run_ranks(processes, train_args(synth_root, run_dir, **{**RUN, **overrides})), run_dir


@pytest.mark.slow
def test_two_ranks_preempted_continue_on_one_with_accumulation_close_to_never_stopping(synth_root, preempted, tmp_path):
    reference, lines, _ = preempted
    (code, second), run_dir = _continue(synth_root, preempted, tmp_path)
    assert code == 0, dump(second)
    (resumed,) = events_of(second, "resumed")
    assert resumed["step"] == 2 and resumed["steps_lost"] == 0
    assert resumed["resized"] == {"from": 2, "to": 1, "batch_from": 4, "batch_to": 4, "accumulation": 2,
                                  "lr_rule": None, "lr_factor": 1.0, "global_batch": 8}
    steps = events_of(second, "step", rank=0)
    ref_steps = events_of(lines, "step", rank=0)
    assert [s["step"] for s in steps] == [s["step"] for s in ref_steps][2:]  # the same optimizer steps ...
    assert [s["lr"] for s in steps] == [s["lr"] for s in ref_steps][2:]  # ... on the same LR schedule
    end, ref_end = events_of(second, "end", rank=0)[0], events_of(lines, "end", rank=0)[0]
    assert (end["status"], end["step"]) == ("completed", ref_end["step"])
    # not bit-identical (other dropout masks, BatchNorm over other micro-batches): close
    got = ckpt.load(run_dir / "checkpoints" / "last.pt")["model"]
    want = ckpt.load(reference / "checkpoints" / "last.pt")["model"]
    for name, tensor in want.items():
        if tensor.is_floating_point() and "running" not in name:
            torch.testing.assert_close(got[name], tensor, rtol=0.05, atol=0.02, msg=name)
    assert not torch.equal(got[next(iter(want))], want[next(iter(want))])


@pytest.mark.slow
def test_a_resize_that_cannot_keep_the_global_batch_is_refused_naming_the_numbers(synth_root, preempted, tmp_path):
    (code, second), _ = _continue(synth_root, preempted, tmp_path, batch_size=3)
    assert code != 0
    (error,) = events_of(second, "error", rank=0)
    assert error["type"] == "ResizeError"
    assert "global batch is 8 images per step (2 rank(s) x batch 4); 1 rank(s) x batch 3 = 3" in error["message"]


@pytest.mark.slow
def test_a_resize_with_an_lr_rule_moves_the_rate(synth_root, preempted, tmp_path):
    _, lines, _ = preempted
    (code, second), _ = _continue(synth_root, preempted, tmp_path, resize_lr_rule="linear")
    assert code == 0, dump(second)
    (resumed,) = events_of(second, "resumed")
    assert (resumed["resized"]["lr_rule"], resumed["resized"]["accumulation"]) == ("linear", 1)
    first = events_of(second, "step", rank=0)[0]
    ref = {s["step"]: s for s in events_of(lines, "step", rank=0)}
    # 4 images per step now: half the rate; the schedule counts images (16 done: its step 2, as step 3 of 8 had)
    assert first["step"] == 3 and first["lr"] == pytest.approx(0.5 * ref[3]["lr"])
    assert events_of(second, "end", rank=0)[0]["status"] == "completed"
