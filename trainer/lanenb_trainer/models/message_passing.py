"""SCNN spatial message passing (Pan et al. 2018) as one custom autograd Function.

Why: the published per-slice loop (slice, conv, relu, add, ``torch.cat``) builds an autograd
graph of ~2x(H+W) tiny convolutions and pays for it in the forward and the backward. Here
the four sweeps are one autograd node whose forward and backward are plain loops of
library convolutions on preallocated buffers:

* layout ``[L, R, C]``: the swept axis outermost, channels last, and the ``N`` batch items
  laid end to end along the conv axis with ``k // 2`` zero rows between and around them, so
  a whole slice is one contiguous ``[R, C]`` matrix (plus up to eight zero rows so that its
  outputs fill whole Winograd tiles) whose 1-D convolution is one
  :mod:`~lanenb_trainer.models.row_conv` call: for 9 taps on the CPU Winograd F(3, 3) nested
  twice (3.2x fewer multiply-adds than the direct convolution, three batched matrix
  products), else one library conv (oneDNN / cuDNN);
* the backward is the hand-written recurrence ``G[prev] += conv^T(relu' * G[i])`` with the
  same row convolution (flipped, transposed kernel), accumulated in place on one gradient
  buffer;
* the weight gradient of all slices is computed after the sequential pass, not one op per
  slice: GEMMs over the slices read as one long row sequence, in the Winograd domain
  (``5 k / 3`` GEMMs, 1.8x fewer multiply-adds; for SCNN's 9 taps nested once more, 25 GEMMs
  over a third of the rows, 3.2x fewer) wherever it fits on the CPU, also for sweeps whose
  slices ran the direct convolution, else ``k`` direct ones;
* the temporaries (``relu' * G``, the weight gradient's transformed rows, the Winograd
  buffers) are reused from call to call (:class:`~lanenb_trainer.models.scratch.Scratch`, one
  per module), not fresh memory that page-faults;
* per slice, the forward is one row conv with the relu fused into it (direct slices) + one
  add into the items' rows only (the conv's outputs between items never reach the layout);
  the relu outputs are kept for the backward (float, about the size of the sweep's output),
  whose slice is one ``threshold_backward`` (relu' * G on the items' rows) + one row
  conv-and-accumulate, on views made once per sweep.

Where the time goes (``bench/scnn_message_passing.py --isa avx2``, 2 threads, AMD EPYC with
kernels limited to AVX2, issue 35): at the quickstart's 4x128x16x40, ~50 ms against ~121 ms
for the published loop (2.4x) and ~48 ms for the floor's four full-map convolutions; in the
profiler the per-slice point products take ~40%, the four weight gradients ~20%, the per-slice
transforms ~15%, Python ~15%, the filter transforms, layout copies and elementwise ops the
rest. At VGG16-SCNN's 4x128x36x100 ours takes ~0.20 s against ~0.62 s (2.8-3.1x) and 0.74x the
floor's time. Before the nested form it was ~62 ms (1.9x) and ~0.26 s; before any Winograd
path and packed weights ~0.32 s there (oneDNN reordered each slice's weight on every call).

With ``algorithm="triton"`` each sweep's whole recurrence is one Triton kernel forward and
one backward (:mod:`~lanenb_trainer.models.sweep_triton`, for the GPU, where the per-slice
library calls are launch-bound), on a plain ``[L, N, S, C]`` layout (no zero frame: the kernel
masks the padding); ``"auto"`` never picks it (unmeasured on a GPU so far).

Double backward is not supported (SCNN training does not need it).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from .row_conv import RowConv, alloc_rows, check_algorithm, row_conv
from .scratch import Scratch, scratch_or_new

__all__ = ["MessagePassing", "message_pass", "slice_rows", "spatial_message_passing"]


def _interior(buf: torch.Tensor, n: int, s: int, pad: int) -> torch.Tensor:
    """``[L, R, C]`` layout -> view ``[L, N, S, C]`` of the item rows (no zero rows)."""
    length, _, c = buf.shape
    return buf[:, pad:slice_rows(n, s, pad)].view(length, n, s + pad, c)[:, :, :s]


def _gaps(buf: torch.Tensor, n: int, s: int, pad: int) -> torch.Tensor:
    """``[L, R, C]`` layout -> view ``[L, N, pad, C]`` of the zero rows after each item
    (the inter-item gaps and the trailing frame): what :func:`_interior` leaves out."""
    length, _, c = buf.shape
    return buf[:, pad:slice_rows(n, s, pad)].view(length, n, s + pad, c)[:, :, s:]


def slice_rows(n: int, s: int, pad: int) -> int:
    """Rows of one slice in the layout: the ``n`` items, each followed by ``pad`` zero rows,
    after ``pad`` leading zero rows (the allocation adds up to eight zero rows: :func:`alloc_rows`)."""
    return n * (s + pad) + pad


def _item_rows(rows: torch.Tensor, n: int, s: int, pad: int) -> torch.Tensor:
    """A slice's conv outputs ``[>= R - k + 1, C]`` (output ``j`` is layout row ``pad + j``) ->
    view ``[N, S, C]`` of the items' rows: what :func:`_interior` is for one layout slice."""
    row, col = rows.stride()
    return rows.as_strided((n, s, rows.shape[1]), ((s + pad) * row, row, col), rows.storage_offset())


def _zero_frame(buf: torch.Tensor, n: int, s: int, pad: int) -> None:
    """Zero every row of a layout buffer but the items' rows: the leading rows, the gaps after
    each item and the rows past the last one (up to the allocation's end)."""
    buf[:, :pad].zero_()
    _gaps(buf, n, s, pad).zero_()
    buf[:, slice_rows(n, s, pad):].zero_()


def _new_layout(like: torch.Tensor, length: int, n: int, s: int, c: int, pad: int) -> torch.Tensor:
    """A layout buffer whose zero frame is zeroed; the caller fills the items' rows (zeroing
    only the frame: ~2 ms less per buffer at 4x128x36x100 than zeroing it all)."""
    buf = like.new_empty((length, alloc_rows(slice_rows(n, s, pad), 2 * pad + 1), c))
    _zero_frame(buf, n, s, pad)
    return buf


def _to_layout(x: torch.Tensor, vertical: bool, pad: int) -> torch.Tensor:
    """NCHW -> ``[L, R, C]``: swept axis outermost; the ``N`` items end to end along the
    conv axis with ``pad`` zero rows between and around them (``R = N * (S + pad) + pad``)."""
    n, c, h, w = x.shape
    length, s = (h, w) if vertical else (w, h)
    buf = _new_layout(x, length, n, s, c, pad)
    _interior(buf, n, s, pad).copy_(x.permute(2, 0, 3, 1) if vertical else x.permute(3, 0, 2, 1))
    return buf


def _relayout(buf: torch.Tensor, n: int, s: int, pad: int, new_s: int, new_pad: int) -> torch.Tensor:
    """Switch the swept axis: ``[H, N, W, C]`` items <-> ``[W, N, H, C]`` items."""
    inner = _interior(buf, n, s, pad).permute(2, 1, 0, 3)
    out = _new_layout(buf, s, n, new_s, buf.shape[2], new_pad)
    _interior(out, n, new_s, new_pad).copy_(inner)
    return out


def _change_layout(
    buf: torch.Tensor, n: int, was_vertical: bool, old_s: int, old_pad: int,
    vertical: bool, s: int, pad: int,
) -> torch.Tensor:
    """A fresh buffer for the next sweep: swapped axis, or (same axis) another kernel size."""
    if vertical != was_vertical:
        return _relayout(buf, n, old_s, old_pad, s, pad)
    return _to_layout(_from_layout(buf, was_vertical, n, old_s, old_pad), vertical, pad)


def _from_layout(buf: torch.Tensor, vertical: bool, n: int, s: int, pad: int) -> torch.Tensor:
    inner = _interior(buf, n, s, pad)  # [L, N, S, C]
    return (inner.permute(1, 3, 0, 2) if vertical else inner.permute(1, 3, 2, 0)).contiguous()


def _sweep_forward(
    src: torch.Tensor, dst: torch.Tensor, conv: RowConv, reverse: bool, n: int, s: int, pad: int,
) -> list[torch.Tensor | None]:
    """``dst[i] = src[i] + relu(conv(dst[prev]))`` on the items' rows (``dst`` may be ``src``;
    its zero frame must be zero: the conv's outputs between items are never written there).

    Returns each slice's ``relu(conv(...))`` items' rows ``[N, S, C]`` (None for the first
    slice, which has no conv): what the backward's relu' reads. Why keep the relu outputs and
    not a uint8 mask (a quarter of the memory): the relu is part of the conv's call (fused into
    oneDNN's on direct slices, in place on the fresh output otherwise), so the per-slice forward
    is the conv and one add, not also a clamp into a buffer and the zeroing of its gaps."""
    length = src.shape[0]
    first = length - 1 if reverse else 0
    if dst is not src:
        dst[first].copy_(src[first])
    conv_in = conv.inputs(dst)
    src_items, dst_items = _interior(src, n, s, pad).unbind(0), _interior(dst, n, s, pad).unbind(0)
    relus: list[torch.Tensor | None] = [None] * length
    for i in range(length - 2, -1, -1) if reverse else range(1, length):
        relu = _item_rows(conv.relu(conv_in[i + 1 if reverse else i - 1]), n, s, pad)
        torch.add(src_items[i], relu, out=dst_items[i])
        relus[i] = relu
    return relus


# relu' * G in one call, written into a view: G where the relu output is > 0, else 0.
_relu_grad = torch.ops.aten.threshold_backward.grad_input


def _sweep_backward(grad: torch.Tensor, relus: list[torch.Tensor | None], conv_t: RowConv, reverse: bool,
                    n: int, s: int, pad: int, scratch: Scratch | None) -> torch.Tensor:
    """Turn ``grad`` (dL/d out) into dL/d in on the items' rows, in place (its other rows take
    whatever conv^T adds there and are never read); returns ``relu' * G`` per slice in the
    layout, zero frame included (in ``scratch``: valid until the next sweep's backward).

    ``relus``: :func:`_sweep_forward`'s relu outputs; ``conv_t`` convolves with the
    transposed, flipped kernel (conv^T as a correlation)."""
    length = grad.shape[0]
    dconv = scratch_or_new(scratch, "relu' * G", tuple(grad.shape), grad)  # items' rows written below
    _zero_frame(dconv, n, s, pad)
    dconv[length - 1 if reverse else 0].zero_()  # the first slice had no conv
    conv_in, grad_at = conv_t.inputs(dconv), conv_t.targets(grad)
    grad_items, dconv_items = _interior(grad, n, s, pad).unbind(0), _interior(dconv, n, s, pad).unbind(0)
    for i in range(0, length - 1) if reverse else range(length - 1, 0, -1):
        _relu_grad(grad_items[i], relus[i], 0, grad_input=dconv_items[i])
        conv_t.add_to(conv_in[i], grad_at[i + 1 if reverse else i - 1])
    return dconv


def _weight_grad(out: torch.Tensor, dconv: torch.Tensor, reverse: bool, conv: RowConv,
                 scratch: Scratch | None) -> torch.Tensor:
    """Slice ``i`` read ``out[prev]`` and produced ``dconv[i]``. Returns ``[k, C_in, C_out]``,
    computed the way ``conv``'s algorithm computes (its geometry, not its taps)."""
    src, dst = (out[1:], dconv[:-1]) if reverse else (out[:-1], dconv[1:])
    return conv.weight_grad(src, dst, scratch)


def _to_slices(x: torch.Tensor, vertical: bool) -> torch.Tensor:
    """NCHW -> a fresh contiguous ``[L, N, S, C]`` (swept axis outermost, channels last): the
    Triton sweep's layout. Always a new buffer (the first sweep runs in place on it)."""
    n, c, h, w = x.shape
    buf = x.new_empty((h, n, w, c) if vertical else (w, n, h, c))
    buf.copy_(x.permute(2, 0, 3, 1) if vertical else x.permute(3, 0, 2, 1))
    return buf


def _swap_slices(buf: torch.Tensor) -> torch.Tensor:
    """``[H, N, W, C]`` <-> ``[W, N, H, C]`` into a fresh buffer (the old one stays saved)."""
    length, n, s, c = buf.shape
    out = buf.new_empty((s, n, length, c))
    out.copy_(buf.permute(2, 1, 0, 3))
    return out


def _from_slices(buf: torch.Tensor, vertical: bool) -> torch.Tensor:
    return (buf.permute(1, 3, 0, 2) if vertical else buf.permute(1, 3, 2, 0)).contiguous()


def _triton_forward(ctx, x: torch.Tensor, spec: tuple[tuple[bool, bool], ...],
                    taps: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """The sweeps of :class:`_MessagePassing` with the Triton kernels: the first sweep of an
    axis runs in place on a fresh layout buffer, a further one on the same axis writes a new
    buffer (each sweep's output is what its weight gradient needs)."""
    from .sweep_triton import sweep_forward

    cur: torch.Tensor | None = None
    axis = False
    saved: list[torch.Tensor] = []
    for (vertical, reverse), tap in zip(spec, taps):
        if cur is None:
            cur = dst = _to_slices(x, vertical)
        elif vertical != axis:
            cur = dst = _swap_slices(cur)
        else:
            dst = None
        cur, mask = sweep_forward(cur, tap.contiguous(), reverse, out=dst)
        saved += [cur, mask]
        axis = vertical
    if cur is None:
        raise ValueError("message passing needs at least one sweep")
    ctx.save_for_backward(*saved, *taps)
    return _from_slices(cur, axis)


def _triton_backward(ctx, grad_y: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
    """The backward of :func:`_triton_forward`: each sweep's recurrence is one Triton kernel,
    in place on one gradient buffer per axis; each weight gradient one library call."""
    from .sweep_triton import sweep_backward
    from .sweep_triton import weight_grad as triton_weight_grad

    spec, k = ctx.spec, len(ctx.spec)
    saved = ctx.saved_tensors
    outs, masks, taps = saved[0:2 * k:2], saved[1:2 * k:2], saved[2 * k:]
    grad_taps: list[torch.Tensor | None] = [None] * k
    grad: torch.Tensor | None = None
    axis = False
    for idx in range(k - 1, -1, -1):
        (vertical, reverse), tap = spec[idx], taps[idx]
        if grad is None:
            grad = _to_slices(grad_y.to(tap.dtype), vertical)
        elif vertical != axis:
            grad = _swap_slices(grad)
        dconv = sweep_backward(grad, masks[idx], tap.contiguous(), reverse)
        if ctx.needs_input_grad[4 + idx]:
            grad_taps[idx] = triton_weight_grad(outs[idx], dconv, reverse, tap.shape[0]).to(
                ctx.weight_dtypes[idx])
        axis = vertical
    if grad is None:  # forward refused an empty spec, so this is unreachable
        raise ValueError("message passing needs at least one sweep")
    grad_x = _from_slices(grad, axis) if ctx.needs_input_grad[0] else None
    return (grad_x, None, None, None, *grad_taps)


class _MessagePassing(torch.autograd.Function):
    """A chain of sweeps ``spec = ((vertical, reverse), ...)`` with taps ``[k, C_in, C_out]``.

    Data lives in the layout of :func:`_to_layout` between sweeps (one relayout per change of
    axis); the first sweep of an axis runs in place on the fresh layout buffer, the next one
    writes a new buffer, because each sweep's output is what its weight gradient needs. The
    backward runs every sweep's recurrence in place on one gradient buffer per axis.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, spec: tuple[tuple[bool, bool], ...], algorithm: str,
                scratch: Scratch | None, *taps: torch.Tensor):
        n, c, h, w = x.shape
        ctx.scratch = scratch
        ctx.weight_dtypes = [t.dtype for t in taps]
        taps = tuple(t.to(x.dtype) for t in taps)
        if algorithm == "triton":
            ctx.spec, ctx.algorithm, ctx.shape = spec, algorithm, tuple(x.shape)
            return _triton_forward(ctx, x, spec, taps)
        saved: list[torch.Tensor] = []
        relus: list[list[torch.Tensor | None]] = []
        # the current layout (buffer, axis, slice width, pad): set by the first sweep, read after
        cur: torch.Tensor | None = None
        axis, cur_s, cur_pad = False, 0, 0
        for (vertical, reverse), tap in zip(spec, taps):
            kernel = tap.shape[0]
            pad, s = kernel // 2, (w if vertical else h)
            length = h if vertical else w
            if cur is None:
                cur = dst = _to_layout(x, vertical, pad)
            elif vertical != axis or pad != cur_pad:
                cur = dst = _change_layout(cur, n, axis, cur_s, cur_pad, vertical, s, pad)
            else:
                dst = _new_layout(cur, length, n, s, c, pad)
            conv = row_conv(tap, slice_rows(n, s, pad), algorithm, scratch)
            relus.append(_sweep_forward(cur, dst, conv, reverse, n, s, pad))
            saved.append(dst)
            cur, axis, cur_s, cur_pad = dst, vertical, s, pad
        if cur is None:
            raise ValueError("message passing needs at least one sweep")
        ctx.save_for_backward(*saved, *taps)
        ctx.relus = relus  # intermediates, not inputs or outputs: kept on ctx (no double backward)
        ctx.spec, ctx.algorithm, ctx.shape = spec, algorithm, (n, c, h, w)
        return _from_layout(cur, axis, n, cur_s, cur_pad)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y: torch.Tensor):
        if ctx.algorithm == "triton":
            return _triton_backward(ctx, grad_y)
        spec, (n, _, h, w) = ctx.spec, ctx.shape
        k = len(spec)
        saved = ctx.saved_tensors
        outs, taps = saved[:k], saved[k:]
        grad_taps: list[torch.Tensor | None] = [None] * k
        # the gradient's layout (buffer, axis, slice width, pad): set by the last sweep, read after
        grad: torch.Tensor | None = None
        axis, cur_s, cur_pad = False, 0, 0
        for idx in range(k - 1, -1, -1):
            (vertical, reverse), tap = spec[idx], taps[idx]
            kernel = tap.shape[0]
            pad, s = kernel // 2, (w if vertical else h)
            if grad is None:
                grad = _to_layout(grad_y.to(tap.dtype), vertical, pad)
            elif vertical != axis or pad != cur_pad:
                grad = _change_layout(grad, n, axis, cur_s, cur_pad, vertical, s, pad)
            # conv^T = correlation with the flipped, transposed kernel on the zero-framed rows.
            conv_t = row_conv(tap.flip(0).transpose(1, 2), slice_rows(n, s, pad), ctx.algorithm, ctx.scratch)
            dconv = _sweep_backward(grad, ctx.relus[idx], conv_t, reverse, n, s, pad, ctx.scratch)
            if ctx.needs_input_grad[4 + idx]:
                grad_taps[idx] = _weight_grad(outs[idx], dconv, reverse, conv_t, ctx.scratch).to(
                    ctx.weight_dtypes[idx])
            axis, cur_s, cur_pad = vertical, s, pad
        if grad is None:  # forward refused an empty spec, so this is unreachable
            raise ValueError("message passing needs at least one sweep")
        grad_x = _from_layout(grad, axis, n, cur_s, cur_pad) if ctx.needs_input_grad[0] else None
        return (grad_x, None, None, None, *grad_taps)


def _as_taps(weight: torch.Tensor, vertical: bool) -> torch.Tensor:
    """``[C_out, C_in, 1, k]`` (vertical sweep) or ``[C_out, C_in, k, 1]`` -> ``[k, C_in, C_out]``."""
    if weight.dim() != 4 or weight.shape[0] != weight.shape[1]:
        raise ValueError(f"message-passing weight must be [C, C, kh, kw], got {tuple(weight.shape)}")
    k = weight.shape[3] if vertical else weight.shape[2]
    expected = (1, k) if vertical else (k, 1)
    if tuple(weight.shape[2:]) != expected or k % 2 == 0:
        sweep = "vertical (down/up)" if vertical else "horizontal (right/left)"
        raise ValueError(
            f"{sweep} message-passing weight must have an odd kernel shaped {expected}, "
            f"got {tuple(weight.shape[2:])}"
        )
    w = weight.squeeze(2) if vertical else weight.squeeze(3)  # [C_out, C_in, k]
    return w.permute(2, 1, 0)


def _run(x: torch.Tensor, spec: tuple[tuple[bool, bool], ...], weights: list[torch.Tensor],
         algorithm: str, scratch: Scratch | None = None) -> torch.Tensor:
    check_algorithm(algorithm)
    for wt in weights:
        _check_input(x, wt)
    if algorithm == "triton":
        from .sweep_triton import check_usable

        check_usable(x)
    taps = [_as_taps(wt, vertical) for wt, (vertical, _) in zip(weights, spec)]
    # The sweeps run in the input's dtype (fp16/bf16 under AMP) with autocast off, so the
    # hand-written backward sees exactly the dtypes the forward used.
    with torch.autocast(device_type=x.device.type, enabled=False):
        return _MessagePassing.apply(x, spec, algorithm, scratch, *taps)


def message_pass(x: torch.Tensor, weight: torch.Tensor, *, vertical: bool, reverse: bool,
                 algorithm: str = "auto", scratch: Scratch | None = None) -> torch.Tensor:
    """One SCNN sweep on an NCHW tensor (``vertical``: along H, i.e. down/up; else right/left).

    Equal to the published loop ``out[i] = x[i] + relu(conv(out[i -/+ 1]))`` with a bias-free
    ``weight`` of shape ``[C, C, 1, k]`` (vertical) or ``[C, C, k, 1]`` (horizontal).
    ``algorithm`` picks the per-slice convolution (``"auto"``, ``"direct"``, ``"winograd"``:
    :func:`~lanenb_trainer.models.row_conv.row_conv`), or ``"triton"``: each whole sweep as
    one Triton kernel (:mod:`~lanenb_trainer.models.sweep_triton`; a GPU, or the CPU under
    ``TRITON_INTERPRET=1``; never chosen by ``"auto"``). ``scratch``: buffers to reuse for the
    temporaries (:class:`~lanenb_trainer.models.scratch.Scratch`; :class:`MessagePassing` keeps
    one), else they are allocated anew.
    """
    return _run(x, ((vertical, reverse),), [weight], algorithm, scratch)


def spatial_message_passing(
    x: torch.Tensor,
    down: torch.Tensor,
    up: torch.Tensor,
    right: torch.Tensor,
    left: torch.Tensor,
    algorithm: str = "auto",
    scratch: Scratch | None = None,
) -> torch.Tensor:
    """The four SCNN sweeps in order down, up, right, left (one autograd node in total);
    ``algorithm`` and ``scratch`` as in :func:`message_pass`."""
    spec = ((True, False), (True, True), (False, False), (False, True))
    return _run(x, spec, [down, up, right, left], algorithm, scratch)


def _check_input(x: torch.Tensor, weight: torch.Tensor) -> None:
    if x.dim() != 4:
        raise ValueError(f"message passing expects an NCHW tensor, got shape {tuple(x.shape)}")
    if x.shape[1] != weight.shape[1]:
        raise ValueError(
            f"message passing has {weight.shape[1]} channels but the input has {x.shape[1]}"
        )


def plain_message_passing(x: torch.Tensor, down: torch.Tensor, up: torch.Tensor, right: torch.Tensor,
                          left: torch.Tensor) -> torch.Tensor:
    """The same four sweeps as plain per-slice ops (slice, conv2d, relu, cat).

    Slower, but every op is a standard one: ``torch.jit.trace`` and the ONNX exporters
    record it, where they cannot record the custom autograd ``Function``. Used for export
    (``MessagePassing.plain``) and checked equal to the fast path in the tests.
    """
    for weight, (vertical, reverse) in zip((down, up, right, left),
                                           ((True, False), (True, True), (False, False), (False, True))):
        k = weight.shape[3] if vertical else weight.shape[2]
        pad = (0, k // 2) if vertical else (k // 2, 0)
        dim = 2 if vertical else 3
        slices = [x.narrow(dim, i, 1) for i in range(x.shape[dim])]
        if reverse:
            slices = slices[::-1]
        out = [slices[0]]
        for i in range(1, len(slices)):
            out.append(slices[i] + F.relu(F.conv2d(out[i - 1], weight, padding=pad)))
        if reverse:
            out = out[::-1]
        x = torch.cat(out, dim=dim)
    return x


class MessagePassing(nn.Module):
    """SCNN's spatial CNN block: sweeps down, up, right and left with bias-free convs.

    The four convs are ordinary ``nn.Conv2d`` modules so checkpoints keep the familiar
    ``down.weight`` / ``up.weight`` / ``right.weight`` / ``left.weight`` layout; only the
    computation is custom.
    """

    def __init__(self, channels: int = 128, kernel_size: int = 9) -> None:
        super().__init__()
        if channels < 1:
            raise ValueError(f"channels must be >= 1, got {channels}")
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be a positive odd number, got {kernel_size}")
        p = kernel_size // 2
        self.down = nn.Conv2d(channels, channels, (1, kernel_size), padding=(0, p), bias=False)
        self.up = nn.Conv2d(channels, channels, (1, kernel_size), padding=(0, p), bias=False)
        self.right = nn.Conv2d(channels, channels, (kernel_size, 1), padding=(p, 0), bias=False)
        self.left = nn.Conv2d(channels, channels, (kernel_size, 1), padding=(p, 0), bias=False)
        # pytorch-auto-drive's SCNN init (its spatial_conv.py): uniform +-sqrt(2 / (C * k * 5)),
        # std = bound / sqrt(3). Small, so the four accumulating sweeps do not amplify the
        # features at the start of training (the sweep's output/input RMS stays near PAD's).
        bound = math.sqrt(2.0 / (channels * kernel_size * 5))
        for conv in (self.down, self.up, self.right, self.left):
            nn.init.uniform_(conv.weight, -bound, bound)
        self.scratch = Scratch()  # this module's reused temporaries (not state: never saved)

    plain = False  # True (set by lanenb export): plain ops that tracers and exporters can record

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = (self.down.weight, self.up.weight, self.right.weight, self.left.weight)
        if self.plain or torch.jit.is_tracing() or torch.jit.is_scripting() or torch.onnx.is_in_onnx_export():
            return plain_message_passing(x, *weights)
        return spatial_message_passing(x, *weights, scratch=self.scratch)
