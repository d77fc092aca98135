"""The per-slice row convolution: Winograd F(3, 3), one level and nested twice, equals the
direct convolution, so do the weight gradients over all slices, the pre-packed oneDNN weight
equals F.conv2d, and `auto` picks what the bench measured."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lanenb_trainer.models.message_passing import message_pass, spatial_message_passing
from lanenb_trainer.models.row_conv import (
    DirectRowConv,
    NestedWinogradRowConv,
    WinogradRowConv,
    WinogradTiling,
    _Conv,
    alloc_rows,
    row_conv,
    weight_grad,
    winograd_weight_grad_fits,
)

DIRECTIONS = [(True, False), (True, True), (False, False), (False, True)]


def _slices(length: int, rows: int, c: int, kernel: int, dtype: torch.dtype) -> torch.Tensor:
    """Zero-framed slices as the sweeps lay them out: data in rows pad..rows-pad, zeros after."""
    pad = kernel // 2
    buf = torch.zeros(length, alloc_rows(rows, kernel), c, dtype=dtype)
    buf[:, pad:rows - pad] = torch.randn(length, rows - 2 * pad, c, dtype=dtype)
    return buf


def _reference(buf: torch.Tensor, taps: torch.Tensor, rows: int) -> torch.Tensor:
    """y[i] = sum_t x[i + t] @ taps[t], written out with no library convolution."""
    k = taps.shape[0]
    x = buf[:, :rows]
    return sum(torch.einsum("lrc,co->lro", x[:, t:rows - k + 1 + t], taps[t]) for t in range(k))


@pytest.mark.parametrize("kernel", [3, 9, 15])
@pytest.mark.parametrize("rows", [23, 24, 25, 164])  # outputs not a multiple of 3, and the bench's
def test_winograd_equals_direct_in_float64(kernel: int, rows: int) -> None:
    c = 6
    buf = _slices(3, rows, c, kernel, torch.float64)
    taps = torch.randn(kernel, c, c + 2, dtype=torch.float64)  # C_in != C_out too
    ref = _reference(buf, taps, rows)
    for conv in (DirectRowConv(taps, rows), WinogradRowConv(taps, rows)):
        got = torch.stack([conv(item) if isinstance(conv, WinogradRowConv)
                           else conv(item)[0, :, 0].t() for item in conv.inputs(buf)])
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls", [WinogradRowConv, NestedWinogradRowConv])
def test_winograd_float32_stays_close(cls) -> None:
    """The transforms are exact integers and G carries the fractions: float32 stays ~1e-6
    (nested: ~4e-6)."""
    buf = _slices(4, 164, 128, 9, torch.float32)
    taps = torch.randn(9, 128, 128) / (128 * 9) ** 0.5
    ref = _reference(buf.double(), taps.double(), 164)
    conv = cls(taps, 164)
    got = torch.stack([conv(item) for item in conv.inputs(buf)]).double()
    assert float((got - ref).abs().max() / ref.abs().max()) < 1e-5


@pytest.mark.parametrize("cls", [WinogradRowConv, NestedWinogradRowConv])
def test_winograd_add_to_accumulates_whole_tiles(cls) -> None:
    """Whole tiles (nested: whole groups of 9) reach past the outputs into the frame; the
    outputs' rows get exactly the convolution added."""
    rows, c = 25, 5
    buf = _slices(2, rows, c, 9, torch.float64)
    taps = torch.randn(9, c, c, dtype=torch.float64)
    conv = cls(taps, rows)
    target = torch.randn(2, alloc_rows(rows, 9), c, dtype=torch.float64)
    before = target.clone()
    for item, view in zip(conv.inputs(buf), conv.targets(target)):
        conv.add_to(item, view)
    m = rows - 8
    torch.testing.assert_close(target[:, 4:4 + m], before[:, 4:4 + m] + _reference(buf, taps, rows))
    torch.testing.assert_close(target[:, :4], before[:, :4])  # the leading frame is untouched


def _reference_weight_grad(buf: torch.Tensor, grads: torch.Tensor, kernel: int, rows: int) -> torch.Tensor:
    """dL/d taps[t] = sum over slices and outputs i of x[i + t]^T g[pad + i], written out."""
    m, pad = rows - kernel + 1, kernel // 2
    return torch.stack([torch.einsum("lrc,lro->co", buf[:, t:t + m], grads[:, pad:pad + m])
                        for t in range(kernel)])


def _tap_layouts(taps: torch.Tensor) -> dict[str, torch.Tensor]:
    """The same taps as the sweeps hand them over: contiguous, the forward's permuted view of
    a ``[C_out, C_in, 1, k]`` weight, and the backward's flipped copy of it transposed."""
    weight = taps.permute(2, 1, 0).contiguous()  # [C_out, C_in, k]
    transposed = taps.flip(0).permute(1, 2, 0).contiguous()  # the backward's weight: [C_in, C_out, k]
    return {"contiguous": taps.contiguous(), "weight view": weight.permute(2, 1, 0),
            "flipped, transposed": transposed.permute(2, 1, 0).flip(0).transpose(1, 2)}


@pytest.mark.parametrize("rows", [9, 13, 23, 24, 25, 84, 164, 180])  # 1 to 20 groups, ragged last ones
def test_nested_winograd_equals_direct_in_float64(rows: int) -> None:
    c = 6
    buf = _slices(3, rows, c, 9, torch.float64)
    taps = torch.randn(9, c, c + 2, dtype=torch.float64)  # C_in != C_out too
    ref = _reference(buf, taps, rows)
    for layout, view in _tap_layouts(taps).items():
        conv = NestedWinogradRowConv(view, rows)
        got = torch.stack([conv(item) for item in conv.inputs(buf)])
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12, msg=layout)
        relu = torch.stack([conv.relu(item)[:rows - 8] for item in conv.inputs(buf)])
        torch.testing.assert_close(relu, ref.clamp(min=0), rtol=1e-12, atol=1e-12, msg=layout)


def test_nested_winograd_refuses_what_it_cannot_run() -> None:
    with pytest.raises(ValueError, match="needs 9 taps, got 15"):
        NestedWinogradRowConv(torch.zeros(15, 4, 4), 84)
    with pytest.raises(ValueError, match=r"slice buffer \(2, 87, 4\) is not laid out for 9 groups"):
        NestedWinogradRowConv(torch.zeros(9, 4, 4), 84).inputs(torch.zeros(2, 87, 4))  # 90 rows needed


@pytest.mark.parametrize("kernel", [3, 9, 15])
@pytest.mark.parametrize("rows", [23, 24, 25, 84, 164])  # outputs not a multiple of 3, the bench's
def test_both_weight_gradients_equal_the_written_out_sum(kernel: int, rows: int) -> None:
    """The flattened-slice GEMMs (direct) and the Winograd-domain products read every slice
    as one block; a window across two slices must meet only the zero frame of the gradient."""
    c = 6
    buf = _slices(5, rows, c, kernel, torch.float64)
    buf[:, rows:] = 7.0  # the allocation's extra rows: whole tiles read them, no output uses them
    grads = _slices(5, rows, c + 2, kernel, torch.float64)  # zero in the frame, C_out != C_in
    ref = _reference_weight_grad(buf, grads, kernel, rows)
    taps = torch.zeros(kernel, c, c + 2, dtype=torch.float64)
    torch.testing.assert_close(weight_grad(buf, grads, kernel), ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(DirectRowConv(taps, rows).weight_grad(buf, grads), ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(WinogradRowConv(taps, rows).weight_grad(buf, grads), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rows", [13, 23, 84])
@pytest.mark.parametrize("length", range(1, 11))
def test_nested_weight_gradient_covers_every_output_whatever_the_groups_leave_over(length: int, rows: int) -> None:
    """9 taps: groups of 9 outputs over all slices end to end; however many slices, the
    outputs past the last whole group (0 to 16 of them) still count, and no group reads past
    the buffer."""
    buf = _slices(length, rows, 5, 9, torch.float64)
    buf[:, rows:] = 7.0
    grads = _slices(length, rows, 4, 9, torch.float64)
    ref = _reference_weight_grad(buf, grads, 9, rows)
    got = WinogradTiling(9, rows).weight_grad(buf, grads)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)


def test_a_direct_sweeps_weight_gradient_runs_in_the_winograd_domain_where_it_pays() -> None:
    """A sweep whose slices run the direct convolution (asked for here; "auto" nests Winograd
    at 84 rows) still gets its weight gradient over all slices in the Winograd domain, equal
    to the written-out sum."""
    rows, c = 84, 128
    buf, grads = _slices(3, rows, c, 9, torch.float64), _slices(3, rows, c, 9, torch.float64)
    taps = torch.zeros(9, c, c, dtype=torch.float64)
    conv = row_conv(taps, rows, "direct")
    assert type(conv) is DirectRowConv and winograd_weight_grad_fits(buf, 9, rows)
    torch.testing.assert_close(conv.weight_grad(buf, grads), _reference_weight_grad(buf, grads, 9, rows),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("why,tensor,kernel,rows", [
    ("few channels", torch.zeros(2, 87, 64), 9, 84),
    ("few rows", torch.zeros(2, 51, 128), 9, 48),
    ("not 3 * s taps", torch.zeros(2, 87, 128), 7, 84),
    ("bf16", torch.zeros(2, 87, 128, dtype=torch.bfloat16), 9, 84),
])
def test_the_direct_weight_gradient_stays_where_winograd_does_not_fit(why, tensor, kernel, rows) -> None:
    assert not winograd_weight_grad_fits(tensor, kernel, rows), why


def test_winograd_weight_gradient_float32_stays_close() -> None:
    buf, grads = _slices(6, 164, 128, 9, torch.float32), _slices(6, 164, 128, 9, torch.float32)
    ref = _reference_weight_grad(buf.double(), grads.double(), 9, 164)
    got = WinogradRowConv(torch.zeros(9, 128, 128), 164).weight_grad(buf, grads).double()
    assert float((got - ref).abs().max() / ref.abs().max()) < 1e-5


def test_weight_gradient_of_slices_too_short_to_convolve_is_zero() -> None:
    buf = torch.randn(3, alloc_rows(6, 9), 4)
    grads = torch.zeros_like(buf)  # no output rows: all zero frame
    assert not weight_grad(buf, grads, 9).any()
    assert not weight_grad(buf[:0], grads[:0], 9).any()
    # the Winograd ones know the slice's rows: no outputs, nothing read
    assert not WinogradRowConv(torch.zeros(9, 4, 4), 6).weight_grad(buf, buf).any()
    assert not NestedWinogradRowConv(torch.zeros(9, 4, 4), 6).weight_grad(buf, buf).any()


def test_packed_weight_equals_f_conv2d_and_is_used() -> None:
    """On a oneDNN build the weight is reordered once; the results are F.conv2d's, bit for bit."""
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    cases = [  # (weight, groups, channels-last [1, C, 1, R] image): direct and Winograd shapes
        (torch.randn(128, 128, 1, 9), 1, torch.randn(164, 128).t().unsqueeze(0).unsqueeze(2)),
        (torch.randn(640, 128, 1, 3), 5, torch.randn(54, 640).t().unsqueeze(0).unsqueeze(2)),
    ]
    for weight, groups, image in cases:
        weight = weight.contiguous(memory_format=torch.channels_last)
        conv = _Conv(weight, tuple(image.shape), groups)
        assert conv.packed is not None and conv.packed.layout == torch._mkldnn
        torch.testing.assert_close(conv(image), F.conv2d(image, weight, groups=groups), rtol=0, atol=0)
    assert _Conv(torch.randn(4, 4, 1, 3, dtype=torch.float64), (1, 4, 1, 10)).packed is None


def test_packed_conv_falls_back_to_f_conv2d_when_the_internal_op_refuses() -> None:
    """The packed path rests on torch internals: if a torch changes them, results stay right."""
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    weight = torch.randn(16, 16, 1, 3).contiguous(memory_format=torch.channels_last)
    conv = _Conv(weight, (1, 16, 1, 20))
    conv.packed = torch.randn(3)  # what the internal op cannot take: it raises RuntimeError
    image = torch.randn(20, 16).t().unsqueeze(0).unsqueeze(2)
    torch.testing.assert_close(conv(image), F.conv2d(image, weight))
    assert conv.packed is None


@pytest.mark.parametrize(
    "taps_shape,dtype,rows,expected",
    [
        ((9, 128, 128), torch.float32, 84, NestedWinogradRowConv),  # the quickstart's horizontal sweeps
        ((9, 64, 64), torch.float64, 420, NestedWinogradRowConv),
        ((9, 128, 128), torch.float32, 24, DirectRowConv),  # few rows: measured slower
        ((9, 16, 16), torch.float32, 420, DirectRowConv),  # few channels
        ((3, 128, 128), torch.float32, 164, WinogradRowConv),  # other multiples of 3: one level
        ((15, 128, 128), torch.float32, 108, DirectRowConv),  # one level, few rows: measured slower
        ((5, 128, 128), torch.float32, 420, DirectRowConv),  # not a multiple of 3 taps
        ((9, 128, 128), torch.bfloat16, 420, DirectRowConv),  # AMP: no transforms in bf16
    ],
)
def test_auto_picks_what_the_bench_measured(taps_shape, dtype, rows: int, expected) -> None:
    assert type(row_conv(torch.zeros(taps_shape, dtype=dtype), rows)) is expected


def test_bad_algorithm_names_the_value() -> None:
    x = torch.randn(1, 4, 5, 6)
    w = torch.randn(4, 4, 1, 9)
    with pytest.raises(ValueError, match=r"one of \('auto', 'direct', 'winograd', 'triton'\), got 'fast'"):
        message_pass(x, w, vertical=True, reverse=False, algorithm="fast")
    with pytest.raises(ValueError, match="multiple of 3 taps, got 5"):
        message_pass(x, torch.randn(4, 4, 1, 5), vertical=True, reverse=False, algorithm="winograd")


@pytest.mark.parametrize("kernel", [3, 9])
def test_gradcheck_winograd_sweeps(kernel: int) -> None:
    x = torch.randn(2, 3, 5, 7, dtype=torch.float64, requires_grad=True)
    # Weights scaled as the model's are: unscaled, four sweeps amplify the values until the
    # numerical Jacobian's own rounding (not the analytical one) exceeds gradcheck's 1e-5.
    ws = [((torch.randn(3, 3, 1, kernel) if v else torch.randn(3, 3, kernel, 1)) / (3 * kernel) ** 0.5)
          .double().requires_grad_() for v, _ in DIRECTIONS]
    assert torch.autograd.gradcheck(lambda *a: spatial_message_passing(*a, algorithm="winograd"), (x, *ws))


@pytest.mark.parametrize("shape", [(4, 128, 36, 100), (3, 130, 7, 11)], ids=["bench-shape", "odd"])
def test_module_algorithms_agree_in_float32(shape) -> None:
    """The training dtype: Winograd + packed weights against the direct library conv, fwd + bwd."""
    c = shape[1]
    x = torch.randn(shape, requires_grad=True)
    g = torch.randn(shape)
    ws = [((torch.randn(c, c, 1, 9) if v else torch.randn(c, c, 9, 1)) / (c * 9) ** 0.5).requires_grad_()
          for v, _ in DIRECTIONS]
    results = {}
    for algorithm in ("direct", "winograd"):
        out = spatial_message_passing(x, *ws, algorithm=algorithm)
        results[algorithm] = [out.detach(), *torch.autograd.grad(out, (x, *ws), g)]
    out_w, out_d = results["winograd"][0], results["direct"][0]
    assert float((out_w - out_d).norm() / out_d.norm()) < 1e-5
    for a, b in zip(results["winograd"][1:], results["direct"][1:]):
        # A relu input that rounds across 0 flips one mask entry and moves the gradients along
        # its chain: ~1e-3 of the norm (the published loop against float64 does the same), far
        # below what a wrong gradient gives (~1).
        assert float((a - b).norm() / b.norm()) < 1e-2


def test_winograd_weight_gradient_refuses_slices_not_laid_out_for_it() -> None:
    rows = 84  # alloc_rows gives 90; 86 rows keep the windows but break the slices' 3-row grid
    buf = torch.zeros(2, 86, 4)
    with pytest.raises(ValueError, match=r"slices \(2, 86, 4\) / \(2, 86, 4\) are not laid out for 28 windows"):
        WinogradRowConv(torch.zeros(9, 4, 4), rows).weight_grad(buf, buf)
