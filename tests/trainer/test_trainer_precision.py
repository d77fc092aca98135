"""Where and in what a rank computes: ``--device``, the DDP backend for shared GPUs, NVML's
name for the rank's GPU, and ``--amp``/``--amp-dtype``/``--channels-last``.

The GPU itself is bench/gpu_check.py's; these are the decisions around it, which a CPU can
check: each test names the mistake it guards against.
"""

from __future__ import annotations

import pytest
import torch
from trainer_support import dump, events_of, run_ranks, train_args

from lanenb_trainer.config import TrainConfig
from lanenb_trainer.engines.base import EngineError, pick_gpu
from lanenb_trainer.engines.ddp import ddp_backend
from lanenb_trainer.monitor import nvml_device
from lanenb_trainer.training.precision import resolve_precision


def test_device_choice_per_local_rank():
    assert pick_gpu("cpu", 0, 4) is None  # gpus=0 means the CPU even where GPUs are visible
    assert pick_gpu("auto", 3, 0) is None
    assert [pick_gpu("auto", r, 2) for r in range(4)] == [0, 1, 0, 1]  # 4 ranks share 2 GPUs
    assert [pick_gpu("cuda", r, 1) for r in range(3)] == [0, 0, 0]  # several ranks on one GPU


@pytest.mark.parametrize("cuda,visible,why", [
    (None, None, "this torch is a CPU build (torch.version.cuda is None); install a CUDA build"),
    ("12.8", "", "CUDA_VISIBLE_DEVICES='' hides every GPU"),
    ("12.8", None, "torch (CUDA 12.8) finds no GPU: check nvidia-smi and the driver"),
])
def test_cuda_without_a_gpu_fails_saying_why(cuda, visible, why):
    # the mistake: --gpus 1 on a machine whose torch cannot reach a GPU trained on the CPU
    # for hours without a word
    with pytest.raises(EngineError) as exc:
        pick_gpu("cuda", 0, 0, torch_cuda=cuda, visible=visible)
    assert str(exc.value) == f"--device cuda (gpus >= 1): no GPU visible to this rank: {why}"


def test_ddp_backend_when_ranks_share_a_gpu():
    assert ddp_backend("cuda", 1) == "nccl"
    assert ddp_backend("cuda", 3) == "gloo"  # NCCL refuses two ranks on one GPU
    assert ddp_backend("cpu", 1) == "gloo"


@pytest.mark.parametrize("index,visible,expected", [
    (1, None, 1),
    (0, "2,3", 2),
    (1, " 2, 3 ", 3),
    (1, "GPU-aaaa,GPU-bbbb", "GPU-bbbb"),
    (0, "MIG-cccc", "MIG-cccc"),
])
def test_nvml_names_the_rank_s_own_gpu(index, visible, expected):
    # the mistake: NVML counts every GPU of the machine, torch only the visible ones, so
    # CUDA_VISIBLE_DEVICES=2,3 made rank 0 chart GPU 0, another job's
    assert nvml_device(index, visible) == expected


def _cfg(tmp_path, **kw) -> TrainConfig:
    return TrainConfig(data=str(tmp_path), run_dir=str(tmp_path / "run"), **kw)


def test_precision_by_device_and_dtype(tmp_path):
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert resolve_precision(_cfg(tmp_path), cpu).name == "fp32"  # float16 has no CPU autocast
    fp16 = resolve_precision(_cfg(tmp_path), cuda)
    assert (fp16.name, fp16.dtype) == ("fp16", torch.float16)  # scaler(): a GradScaler on a GPU
    bf16 = resolve_precision(_cfg(tmp_path, amp_dtype="bfloat16"), cpu)
    assert (bf16.name, bf16.scaler()) == ("bf16", None)  # bfloat16 needs no loss scaler
    assert resolve_precision(_cfg(tmp_path, amp=False, amp_dtype="bfloat16"), cpu).name == "fp32"
    with bf16.autocast():
        y = torch.nn.functional.linear(torch.randn(2, 3), torch.randn(4, 3))
    assert y.dtype == torch.bfloat16


def test_channels_last_model_and_batch(tmp_path):
    p = resolve_precision(_cfg(tmp_path, channels_last=True), torch.device("cpu"))
    model = p.model(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 8, 1)))
    assert all(m.weight.is_contiguous(memory_format=torch.channels_last) for m in model)
    assert p.batch(torch.randn(2, 3, 8, 8)).is_contiguous(memory_format=torch.channels_last)
    plain = resolve_precision(_cfg(tmp_path), torch.device("cpu"))
    assert plain.batch(torch.randn(2, 3, 8, 8)).is_contiguous()


def test_channels_last_unset_is_on_for_gpu_ranks_only(tmp_path):
    # NHWC was 1.25-1.5x faster for VGG16-SCNN training on an H200 (docs/GPU.md): the default on GPUs
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert resolve_precision(_cfg(tmp_path), cuda).channels_last is True
    assert resolve_precision(_cfg(tmp_path), cpu).channels_last is False
    assert resolve_precision(_cfg(tmp_path, channels_last=False), cuda).channels_last is False
    assert resolve_precision(_cfg(tmp_path, channels_last=True), cpu).channels_last is True
    assert "--channels-last" not in _cfg(tmp_path).to_argv()  # unset stays unset on the rank's argv
    assert "--no-channels-last" in _cfg(tmp_path, channels_last=False).to_argv()


def test_device_cuda_on_a_cpu_only_torch_fails_at_start(synth_root, tmp_path):
    code, lines = run_ranks(1, train_args(synth_root, tmp_path, engine="ddp", device="cuda", epochs=1))
    assert code != 0
    errors = events_of(lines, "error", rank=0)
    assert errors and "--device cuda (gpus >= 1): no GPU visible to this rank" in errors[0]["message"], dump(lines)
    assert not events_of(lines, "step")


@pytest.mark.slow
def test_bf16_channels_last_trains_and_resumes_exactly(synth_root, tmp_path):
    """The AMP path a CPU can run: bfloat16 autocast (the message passing's custom backward in
    bfloat16), channels-last weights and batches, no scaler; stopped and resumed, it ends on
    the same weights as an uninterrupted run."""
    args = dict(engine="ddp", epochs=2, lr=0.02, amp_dtype="bfloat16", channels_last=True)
    code, whole = run_ranks(2, train_args(synth_root, tmp_path / "whole", **args))
    assert code == 0, dump(whole)
    start = events_of(whole, "start", rank=0)[0]
    assert (start["precision"], start["amp"], start["channels_last"]) == ("bf16", True, True)
    steps = events_of(whole, "step", rank=0)
    assert steps and all(0 < e["loss"] < 100 for e in steps)
    reference = events_of(whole, "end", rank=0)[0]
    code, first = run_ranks(2, train_args(synth_root, tmp_path / "cut", max_steps=3, **args))
    assert code == 0, dump(first)
    code, second = run_ranks(2, train_args(synth_root, tmp_path / "cut", resume=True, **args))
    assert code == 0, dump(second)
    end = events_of(second, "end", rank=0)[0]
    assert end["status"] == "completed" and end["step"] == reference["step"]
    assert end["param_checksum"] == reference["param_checksum"]


def test_non_finite_loss_names_its_step(synth_root, tmp_path):
    """Losses are read once per --log-every window (no host sync per step); a NaN inside a
    window must still name the step it came from and stop the run before any checkpoint."""
    code, lines = run_ranks(1, train_args(synth_root, tmp_path, engine="ddp", epochs=1, lr=1e12,
                                          warmup_steps=0, log_every=4, augment=False))
    assert code != 0, dump(lines)
    errors = events_of(lines, "error", rank=0)
    assert errors, dump(lines)
    message = errors[0]["message"]
    assert message.startswith("loss is nan at step ") or message.startswith("loss is inf at step "), message
    step = int(message.split(" at step ")[1].split(":")[0])
    logged = [e["step"] for e in events_of(lines, "step", rank=0)]
    assert all(s <= step for s in logged)  # windows before the bad one were logged, not after
    assert not (tmp_path / "checkpoints" / "last.pt").exists()
