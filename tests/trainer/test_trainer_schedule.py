"""LR schedule, loss, checkpoint atomicity and resume compatibility (single process, fast)."""

from __future__ import annotations

import itertools

import pytest
import torch

from lanenb_trainer import checkpoint as ckpt
from lanenb_trainer.config import TrainConfig
from lanenb_trainer.monitor import SystemMonitor
from lanenb_trainer.recipe import lr_at, scnn_loss, warmup_for


def test_lr_warmup_poly_and_world_scaling():
    cfg = TrainConfig(lr=0.01, warmup_steps=10, poly_power=0.9)
    assert lr_at(0, cfg, 1, 100) == pytest.approx(0.001)
    assert lr_at(9, cfg, 1, 100) == pytest.approx(0.01 * (1 - 0.09) ** 0.9)
    assert lr_at(9, cfg, 4, 100) == pytest.approx(4 * lr_at(9, cfg, 1, 100))
    lrs = [lr_at(s, cfg, 2, 100) for s in range(10, 100)]
    assert all(a > b for a, b in itertools.pairwise(lrs))  # poly decay after warm-up
    assert lr_at(100, cfg, 2, 100) == 0.0


def test_loss_weights_background_and_existence():
    seg = torch.zeros(1, 5, 2, 2)
    seg[:, 0] = 5.0  # confident background
    mask = torch.zeros(1, 2, 2, dtype=torch.long)
    exist = torch.zeros(1, 4)
    total, s, e = scnn_loss(seg, torch.full((1, 4), -20.0), mask, exist)
    assert total.item() == pytest.approx(s.item() + 0.1 * e.item())
    # background pixels weigh 0.4 against 1 for lane pixels in the mean (the SCNN paper's):
    mask[0, 0, 0] = 2
    _, s2, _ = scnn_loss(seg, torch.zeros(1, 4), mask, exist)
    per_pixel = torch.nn.functional.cross_entropy(seg, mask, reduction="none")[0].flatten()
    weights = torch.tensor([1.0, 0.4, 0.4, 0.4])  # pixel (0, 0) is the lane pixel
    assert s2.item() == pytest.approx(float((per_pixel * weights).sum() / weights.sum()), rel=1e-6)
    assert s2.item() != pytest.approx(float(per_pixel.mean()), rel=1e-3)


def test_atomic_save_and_compatibility(tmp_path):
    m = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    state = ckpt.make_state(model=m, optimizer=opt, scaler=None, epoch=1, step_in_epoch=3, global_step=10,
                            lr=0.05, best=None, config={"batch_size": 4, "backbone": "small"}, world_size=2)
    path = ckpt.save_atomic(state, tmp_path / "checkpoints" / "last.pt")
    assert [p.name for p in path.parent.iterdir()] == ["last.pt"]  # no temp file left behind
    loaded = ckpt.load(path)
    assert (loaded["epoch"], loaded["step_in_epoch"], loaded["global_step"], loaded["lr"]) == (1, 3, 10, 0.05)
    ckpt.check_compatible(loaded, batch_size=4, world_size=2, backbone="small")
    with pytest.raises(ValueError, match=r"world size 2 \(now 3\), batch size 4 \(now 8\)"):
        ckpt.check_compatible(loaded, batch_size=8, world_size=3, backbone="small")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ckpt.CheckpointError):
        ckpt.load(tmp_path / "junk.pt")
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        ckpt.load(tmp_path / "missing.pt")


def test_system_monitor_reads_cpu_and_rss():
    seen = []
    mon = SystemMonitor(lambda kind, rank, **f: seen.append((kind, rank, f)), 3, interval=0.05).start()
    import time

    deadline = time.time() + 5
    while not seen and time.time() < deadline:
        time.sleep(0.05)
    mon.stop()
    kind, rank, fields = seen[0]
    assert (kind, rank) == ("system", 3)
    assert fields["rss_mb"] > 10 and "cpu_percent" in fields and "gpu_util" not in fields


def test_event_lines_fit_one_mpi_chunk(tmp_path, capsys):
    """Open MPI re-tags output every 4 KiB: a long traceback must not split an event line."""
    from lanenb_trainer.events import MAX_EVENT_CHARS, EventLog, parse_line

    log = EventLog(0, tmp_path / "events.jsonl")
    tb = "".join(f'  File "x.py", line {i}, in f\n' for i in range(500)) + "RuntimeError: the real cause"
    log("error", type="RuntimeError", message="m" * 5000, traceback=tb)
    log.close()
    line = capsys.readouterr().out.strip()
    assert len(line) <= MAX_EVENT_CHARS
    ev = parse_line(line)
    assert ev.kind == "error" and ev["traceback"].endswith("RuntimeError: the real cause")
    assert (tmp_path / "events.jsonl").read_text().startswith('{"v":1')


def test_resume_refuses_a_changed_seed_split_or_validation(tmp_path):
    """Everything that fixes the data order and the split is checked (switching --use-val on
    used to fail with a KeyError deep in the loop)."""
    m = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    cfg = {"batch_size": 4, "backbone": "small", "seed": 0, "val_fraction": 0.1, "use_val": False}
    state = ckpt.make_state(model=m, optimizer=opt, scaler=None, epoch=0, step_in_epoch=0, global_step=0,
                            lr=0.1, best=None, config=cfg, world_size=2)
    same = dict(batch_size=4, world_size=2, backbone="small", seed=0, val_fraction=0.1, use_val=False)
    ckpt.check_compatible(state, **same)
    for change, message in [({"seed": 1}, "--seed 0 (now 1)"), ({"val_fraction": 0.2}, "--val-fraction 0.1 (now 0.2)"),
                            ({"use_val": True}, "--use-val False (now True)")]:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            ckpt.check_compatible(state, **{**same, **change})


def test_loss_is_weighted_cross_entropy_in_value_and_gradient():
    # written out (no atomics on CUDA, so --deterministic repeats itself): the same as
    # F.cross_entropy(weight=...) for every pixel and every logit's gradient
    torch.manual_seed(0)
    seg = torch.randn(3, 5, 6, 7, dtype=torch.float64, requires_grad=True)
    mask = torch.randint(0, 5, (3, 6, 7))
    weight = torch.tensor([0.4, 1.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    ref = torch.nn.functional.cross_entropy(seg, mask, weight=weight)
    (ref_grad,) = torch.autograd.grad(ref, seg)
    total, s, _ = scnn_loss(seg, torch.zeros(3, 4), mask, torch.zeros(3, 4))
    (grad,) = torch.autograd.grad(total, seg)  # the existence term does not reach seg
    assert s.item() == pytest.approx(ref.item(), rel=1e-6)
    assert torch.allclose(grad.double(), ref_grad, rtol=1e-5, atol=1e-7)


def test_a_warm_up_longer_than_the_run_is_cut_to_a_fifth_so_the_run_reaches_its_rate():
    """The docs' first command runs ~40 steps; with the default 50 warm-up steps its rate never
    reached the target and it ended at test accuracy 0.00-0.37."""
    cfg = TrainConfig(lr=0.01, warmup_steps=50, poly_power=0.9)
    assert warmup_for(50, 40) == 8 and warmup_for(50, 1000) == 50 and warmup_for(0, 40) == 0 and warmup_for(5, 3) == 1
    peak = max(lr_at(s, cfg, 2, 40) for s in range(40))
    assert peak == pytest.approx(lr_at(7, cfg, 2, 40)) and peak > 0.8 * 0.02  # at its rate by step 8, then decays
    long = TrainConfig(lr=0.01, warmup_steps=10)
    assert [lr_at(s, long, 1, 1000) for s in range(12)] == [lr_at(s, long, 1, 1000) for s in range(12)]
    assert lr_at(4, long, 1, 1000) == pytest.approx(0.005 * (1 - 4 / 1000) ** 0.9)  # long runs: unchanged


def test_a_run_shorter_than_the_system_interval_still_has_a_reading_at_start_and_at_stop():
    import time

    seen = []
    mon = SystemMonitor(lambda kind, rank, **f: seen.append((kind, rank, f)), 1, interval=30.0).start()
    time.sleep(0.8)  # past the first reading, far from the interval
    assert [k for k, _, _ in seen] == ["system"]
    mon.stop()
    assert [k for k, _, _ in seen] == ["system", "system"] and seen[-1][2]["rss_mb"] > 10
    quick = []
    SystemMonitor(lambda kind, rank, **f: quick.append(kind), 0, interval=30.0).start().stop()
    assert quick == ["system"]  # stopped before the first reading: the stop's reading still comes
