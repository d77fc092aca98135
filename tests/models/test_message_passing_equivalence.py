"""The custom-autograd message passing equals the published per-slice loop, fwd and bwd."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from lanenb_trainer.models.message_passing import (
    MessagePassing,
    message_pass,
    spatial_message_passing,
)

DIRECTIONS = [(True, False), (True, True), (False, False), (False, True)]  # down, up, right, left


def _loop_sweep(x: torch.Tensor, weight: torch.Tensor, vertical: bool, reverse: bool) -> torch.Tensor:
    """One sweep written independently of the bench: explicit index order, no torch.cat tricks."""
    k = weight.shape[3] if vertical else weight.shape[2]
    pad = (0, k // 2) if vertical else (k // 2, 0)
    dim = 2 if vertical else 3
    rows = list(x.unbind(dim))
    order = range(len(rows) - 2, -1, -1) if reverse else range(1, len(rows))
    for i in order:
        prev = rows[i + 1] if reverse else rows[i - 1]
        rows[i] = rows[i] + F.relu(F.conv2d(prev.unsqueeze(dim), weight, padding=pad).squeeze(dim))
    return torch.stack(rows, dim)


def _weight(c: int, k: int, vertical: bool, dtype: torch.dtype) -> torch.Tensor:
    shape = (c, c, 1, k) if vertical else (c, c, k, 1)
    return (torch.randn(shape) / (c * k) ** 0.5).to(dtype).requires_grad_()


@pytest.mark.parametrize("vertical,reverse", DIRECTIONS)
@pytest.mark.parametrize("kernel", [1, 3, 9])
def test_gradcheck_each_direction(vertical: bool, reverse: bool, kernel: int) -> None:
    # 5x6 map is smaller than the 9-tap kernel: the zero framing between items must hold.
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, requires_grad=True)
    w = _weight(3, kernel, vertical, torch.float64)
    assert torch.autograd.gradcheck(
        lambda a, b: message_pass(a, b, vertical=vertical, reverse=reverse), (x, w)
    )


def test_gradcheck_all_four_sweeps() -> None:
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    ws = [_weight(3, 3, v, torch.float64) for v, _ in DIRECTIONS]
    assert torch.autograd.gradcheck(spatial_message_passing, (x, *ws))


@pytest.mark.parametrize("vertical,reverse", DIRECTIONS)
def test_single_sweep_matches_independent_loop(vertical: bool, reverse: bool) -> None:
    x = torch.randn(3, 8, 7, 11, dtype=torch.float64, requires_grad=True)
    w = _weight(8, 9, vertical, torch.float64)
    g = torch.randn(3, 8, 7, 11, dtype=torch.float64)
    ours = message_pass(x, w, vertical=vertical, reverse=reverse)
    gx, gw = torch.autograd.grad(ours, (x, w), g)
    ref = _loop_sweep(x, w, vertical, reverse)
    rx, rw = torch.autograd.grad(ref, (x, w), g)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gx, rx, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gw, rw, rtol=1e-10, atol=1e-12)


def _all_grads(mp_module: MessagePassing, fn, x: torch.Tensor, g: torch.Tensor) -> list[torch.Tensor]:
    x = x.detach().clone().requires_grad_()
    mp_module.zero_grad(set_to_none=True)
    out = fn(x)
    out.backward(g)
    convs = (mp_module.down, mp_module.up, mp_module.right, mp_module.left)
    return [out.detach(), x.grad] + [c.weight.grad for c in convs]


def _max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("shape", [(4, 128, 36, 100), (1, 16, 9, 10)], ids=["bench-shape", "batch-1"])
def test_module_matches_published_loop(mp_bench, shape: tuple[int, int, int, int]) -> None:
    """Output and every gradient (input + 4 weights) within 1e-4 relative of the baseline.

    float64, so no relu input that sits at ~0 can flip between the two summation orders.
    """
    c = shape[1]
    mp = MessagePassing(c).double()
    with torch.no_grad():
        for conv in (mp.down, mp.up, mp.right, mp.left):
            conv.weight.normal_(0.0, 1.0 / (c * 9) ** 0.5)
    x = torch.randn(shape, dtype=torch.float64)
    g = torch.randn(shape, dtype=torch.float64)
    convs = nn.ModuleList([mp.down, mp.up, mp.right, mp.left])
    ours = _all_grads(mp, mp, x, g)
    ref = _all_grads(mp, lambda t: mp_bench.published_loop(t, convs), x, g)
    for name, a, b in zip(["out", "x", "down", "up", "right", "left"], ours, ref):
        assert _max_rel(a, b) <= 1e-4, name
    # Relus must be mixed on and off, or the comparison would not exercise the masks.
    assert 0.05 < float((ours[0] != x).double().mean()) < 1.0


def test_float32_close_to_float64(mp_bench) -> None:
    mp = MessagePassing(16)
    x = torch.randn(2, 16, 10, 12)
    g = torch.randn(2, 16, 10, 12)
    ours32 = _all_grads(mp, mp, x, g)
    mp64 = MessagePassing(16).double()
    mp64.load_state_dict(mp.state_dict())
    ref64 = _all_grads(mp64, mp64, x.double(), g.double())
    for a, b in zip(ours32, ref64):
        assert _max_rel(a.double(), b) < 1e-5


def test_bf16_autocast_keeps_fp32_weight_grads() -> None:
    mp = MessagePassing(8)
    x = torch.randn(2, 8, 6, 7, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = mp(x.to(torch.bfloat16))
    y.float().sum().backward()
    assert y.dtype == torch.bfloat16
    assert mp.down.weight.grad is not None and mp.down.weight.grad.dtype == torch.float32
    assert x.grad is not None and torch.isfinite(x.grad).all()


@pytest.mark.parametrize("shape", [(1, 3, 1, 5), (2, 3, 4, 1), (1, 3, 1, 1)])
def test_single_row_or_column(shape) -> None:
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    ws = [_weight(3, 9, v, torch.float64) for v, _ in DIRECTIONS]
    assert torch.autograd.gradcheck(spatial_message_passing, (x, *ws))


def test_non_contiguous_input() -> None:
    mp = MessagePassing(4).double()
    base = torch.randn(2, 6, 5, 4, dtype=torch.float64)
    x = base.permute(0, 3, 1, 2)  # [2, 4, 6, 5], non-contiguous
    torch.testing.assert_close(mp(x), mp(x.contiguous()))


@pytest.mark.parametrize(
    "weight_shape,vertical,message",
    [
        ((4, 4, 9, 1), True, r"vertical \(down/up\) message-passing weight must have an odd kernel shaped \(1, 1\)"),
        ((4, 4, 1, 8), True, r"odd kernel shaped \(1, 8\), got \(1, 8\)"),
        ((4, 3, 1, 9), True, r"must be \[C, C, kh, kw\], got \(4, 3, 1, 9\)"),
        ((4, 4, 1, 9), False, r"horizontal \(right/left\) message-passing weight"),
    ],
)
def test_bad_weight_shapes(weight_shape, vertical: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        message_pass(torch.randn(1, weight_shape[1], 4, 4), torch.randn(weight_shape), vertical=vertical, reverse=False)


def test_bad_inputs() -> None:
    mp = MessagePassing(4)
    with pytest.raises(ValueError, match=r"NCHW tensor, got shape \(4, 5, 6\)"):
        mp(torch.randn(4, 5, 6))
    with pytest.raises(ValueError, match="has 4 channels but the input has 3"):
        mp(torch.randn(1, 3, 5, 6))
    with pytest.raises(ValueError, match="kernel_size must be a positive odd number, got 4"):
        MessagePassing(4, 4)
    with pytest.raises(ValueError, match="channels must be >= 1, got 0"):
        MessagePassing(0)
