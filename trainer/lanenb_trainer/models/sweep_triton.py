"""One SCNN sweep's sequential recurrence as two persistent Triton kernels (forward, backward).

Why: on a GPU the library path (:mod:`~lanenb_trainer.models.message_passing` with
``"direct"``) runs ~2x(H+W) = 272 tiny convolutions forward and as many backward at
4x128x36x100: launch-bound. Here each sweep is one kernel launch forward and one backward;
the recurrence over the slices runs inside the kernel.

Design
------
* Layout ``[L, N, S, C]`` contiguous: ``L`` slices along the swept axis, ``N`` batch items,
  ``S`` positions along the conv axis, channels last. One item's slice is one contiguous
  ``[S, C]`` matrix, so a tile ``[BLOCK_S, BLOCK_C]`` is a coalesced 2-D load. The k//2 zero
  padding at the ends of the conv axis is a load mask, not zero rows in memory (simpler than
  the library path's zero-framed ``[L, R, C]`` layout, which exists for one library call per
  slice over all items; here each item is its own program anyway).
* Forward kernel, grid ``(N,)``: one persistent program per batch item loops over all slices
  in sweep order (or reverse). Slice ``i``, per output tile ``[BLOCK_S, BLOCK_CO]``:
  ``acc = sum_t sum_ci y[prev][s + t - pad, ci] @ taps[t][ci, co]`` as ``tl.dot`` GEMMs (fp32
  accumulate; float64 for float64), then ``y[i] = x[i] + relu(acc)`` and the relu' mask
  ``acc > 0`` as uint8 (as the library path keeps it). ``tl.debug_barrier()`` after each slice:
  the next slice reads rows written by other threads of the same program (global memory,
  same CTA: ``bar.sync`` makes them visible). The first slice is copied (``y = x``, mask 0), so
  every element of ``y`` and the mask is written. ``y`` may be ``x`` (in place).
* Backward kernel, same grid: ``G[prev] += conv^T(m_i * G[i])`` in the reverse of the sweep
  order, in place on the gradient, with ``conv^T`` as the same correlation over the flipped,
  transposed taps (``taps.flip(0).transpose(1, 2)``, as the library path does). ``m_i * G[i]``
  is formed in the GEMM's operand loads (no write-then-read inside a slice, so one barrier per
  slice); the kernel also writes ``dconv[i] = m_i * G[i]`` for the weight gradient.
* The weight gradient stays one library call over all slices at once
  (:func:`weight_grad`: ``conv2d_weight`` on ``[(L-1)*N, C, 1, S]`` images).
* Kernels are kept as plain functions and ``triton.jit``-ed on first use, cached per
  interpreter mode: Triton reads ``TRITON_INTERPRET`` when ``triton.jit`` decorates, so a
  decoration at import time would freeze the mode of whoever imported first. On a CPU tensor
  the sweep needs ``TRITON_INTERPRET=1`` (Triton's interpreter, numpy, for tests); otherwise
  :class:`ValueError`.
* dtypes: float32 (``input_precision="ieee"``, so the GPU does not silently use tf32; pass
  ``fp32_precision="tf32"`` to allow it, as cuDNN does by default), float16 and bfloat16
  (native tensor-core dots, fp32 accumulate), float64 (float64 accumulate). The interpreter
  (Triton 3.9) computes a bfloat16 ``tl.dot`` wrongly (it reads the bits as another type;
  upcast operands give the right product), and its float32 -> bfloat16 cast truncates where
  the GPU rounds to nearest even; so under the interpreter (constexpr ``UPCAST``, bfloat16
  only) the operands are upcast to float32 before the dot and the results rounded to nearest
  even by a bit trick before the cast. The GPU keeps the bf16 dot and its own rounding.
* Not written: splitting one item's C_out / S tiles over several programs with an atomic
  spin barrier per slice (it would deadlock in the interpreter, which runs programs one after
  another, and cannot be verified here).

Expected GPU cost (4x128x36x100, k=9, unmeasured)
-------------------------------------------------
Per slice and item one GEMM of ``S x C_out x (C_in * k)`` = 100 x 128 x 1152 (14.7 M
multiply-adds; S = 36 in the horizontal sweeps); the four sweeps are 4 x 36 x 100
slice-positions x 128 x 1152 = 2.1 G multiply-adds per item forward, as many again in the
backward recurrence (the weight gradients are one parallel library call per sweep). Within a
program the S and C_out tiles of a slice run one after another. Only ``N`` programs run (N=4 at the
bench shape): 4 of an H100's / H200's 132 SMs, ~3% of the chip. One SM gives ~1/132 of the
dense tensor peak (~7.5 TFLOP/s bf16/fp16 on an H100 SXM) and ~0.5 TFLOP/s for ieee fp32 (FMA
units, no tensor cores). So the forward is at best ~0.6 ms (fp16/bf16) or ~8 ms (ieee fp32)
of pure math, sequential per item; on top, each slice re-reads the taps (k*C*C = 147 k
elements, 295 KB in bf16) from L2 once per S tile (``BLOCK_S=128`` covers S <= 128 in one
tile), and one SM's L2 bandwidth (~100 GB/s order) makes that ~3 us per slice, ~0.8 ms per
272 slices: the per-slice floor is a few microseconds, against the library path's per-slice
launch plus cuDNN call (~5-10 us each, twice per slice with the backward). Likely outcome:
a win in fp16/bf16 (AMP) over the launch-bound library path, a loss in ieee fp32; larger
``N`` fills more SMs at no extra time per item. The multi-program split (above) is what would
use the rest of the chip for small ``N``.

Unverified until a GPU run: speed and the block-size defaults; that ``tl.debug_barrier`` is
enough ordering for the global-memory read-after-write between slices (Triton could in
principle pipeline the next slice's loads across it; ``num_stages=1`` is passed to rule out
software pipelining); bf16 / fp16 tensor-core dots and float64 ``tl.dot`` on the device;
int32 offsets (checked: the wrapper refuses tensors of 2**31 elements or more); the
``fp32_precision="tf32"`` option; that they compile under the GPU's Triton 3.6. (With Triton
3.9 on a CPU-only machine, ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``
builds an sm_90 cubin for both kernels in all four dtypes at BLOCK_S=128, BLOCK_C=64, k=9,
num_stages=1: 16-96 KB shared memory, ``bar.sync`` in the PTX, mma for bf16/fp16/fp64, none
for ieee fp32 as intended.) The bench (``bench/scnn_message_passing.py``) has no
algorithm or device flag yet, so a GPU session times ``spatial_message_passing(...,
algorithm="triton")`` against ``"direct"`` itself.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.nn.grad  # conv2d_weight: a submodule torch.nn does not re-export to type checkers

try:  # triton ships no type information (no py.typed); without the dev extra it is not installed
    import triton  # type: ignore[import-untyped,import-not-found,unused-ignore]
    import triton.language as tl  # type: ignore[import-untyped,import-not-found,unused-ignore]
except ImportError:  # the library paths do not need it; triton_available() says False
    triton = None
    tl = None

__all__ = ["check_usable", "sweep_backward", "sweep_forward", "triton_available", "weight_grad"]

_ALGORITHM = "triton"


def triton_available() -> bool:
    """True if the ``triton`` package imports (the ``"triton"`` algorithm can run on a GPU,
    or on the CPU under ``TRITON_INTERPRET=1``)."""
    return triton is not None


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def check_usable(x: torch.Tensor) -> None:
    """Raises ValueError naming the algorithm unless the Triton sweep can run on ``x``."""
    if triton is None:
        raise ValueError(f"message-passing algorithm {_ALGORITHM!r} needs the triton package "
                         f"(pip install triton), which does not import here")
    if x.device.type == "cpu" and not _interpreting():
        raise ValueError(f"message-passing algorithm {_ALGORITHM!r} got a CPU tensor: it runs on a GPU, "
                         f"or on the CPU only under Triton's interpreter (TRITON_INTERPRET=1)")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise ValueError(f"message-passing algorithm {_ALGORITHM!r} supports float16, bfloat16, float32 "
                         f"and float64, got {x.dtype}")


def _forward_kernel(x_ptr, y_ptr, m_ptr, w_ptr, L, S, C,
                    K: tl.constexpr, REVERSE: tl.constexpr, BLOCK_S: tl.constexpr,
                    BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, IEEE: tl.constexpr,
                    UPCAST: tl.constexpr, ACC64: tl.constexpr):
    """``y[i] = x[i] + relu(sum_t y[prev][. + t - pad] @ w[t])`` over the slices of item
    ``program_id(0)``; ``m[i] = acc > 0``. ``x``, ``y``, ``m``: ``[L, N, S, C]``; ``w``:
    ``[K, C_in, C_out]``; all contiguous."""
    n = tl.program_id(0)
    item = S * C
    slice_stride = tl.num_programs(0) * item
    x_ptr += n * item
    y_ptr += n * item
    m_ptr += n * item
    rs = tl.arange(0, BLOCK_S)
    rco = tl.arange(0, BLOCK_CO)
    rci = tl.arange(0, BLOCK_CI)
    if REVERSE:
        first = L - 1
    else:
        first = 0
    for s0 in range(0, S, BLOCK_S):  # the first slice: y = x, mask 0
        for c0 in range(0, C, BLOCK_CO):
            offs = first * slice_stride + (s0 + rs)[:, None] * C + (c0 + rco)[None, :]
            ok = ((s0 + rs) < S)[:, None] & ((c0 + rco) < C)[None, :]
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=ok), mask=ok)
            tl.store(m_ptr + offs, tl.full((BLOCK_S, BLOCK_CO), 0, tl.uint8), mask=ok)
    tl.debug_barrier()
    for j in range(1, L):
        if REVERSE:
            i = L - 1 - j
            prev = i + 1
        else:
            i = j
            prev = i - 1
        for s0 in range(0, S, BLOCK_S):
            for c0 in range(0, C, BLOCK_CO):
                co_ok = (c0 + rco) < C
                if ACC64:
                    acc = tl.full((BLOCK_S, BLOCK_CO), 0, tl.float64)
                else:
                    acc = tl.full((BLOCK_S, BLOCK_CO), 0, tl.float32)
                for t in tl.static_range(K):
                    rows = s0 + rs + (t - K // 2)
                    row_ok = (rows >= 0) & (rows < S)
                    for ci0 in range(0, C, BLOCK_CI):
                        ci_ok = (ci0 + rci) < C
                        a = tl.load(y_ptr + prev * slice_stride + rows[:, None] * C + (ci0 + rci)[None, :],
                                    mask=row_ok[:, None] & ci_ok[None, :], other=0.0)
                        w = tl.load(w_ptr + t * C * C + (ci0 + rci)[:, None] * C + (c0 + rco)[None, :],
                                    mask=ci_ok[:, None] & co_ok[None, :], other=0.0)
                        if UPCAST:
                            a = a.to(tl.float32)
                            w = w.to(tl.float32)
                        if IEEE:
                            acc = tl.dot(a, w, acc, input_precision="ieee")
                        else:
                            acc = tl.dot(a, w, acc)
                offs = i * slice_stride + (s0 + rs)[:, None] * C + (c0 + rco)[None, :]
                ok = ((s0 + rs) < S)[:, None] & co_ok[None, :]
                xv = tl.load(x_ptr + offs, mask=ok, other=0.0)
                out = xv.to(acc.dtype) + tl.maximum(acc, 0.0)
                if UPCAST:  # the interpreter truncates fp32 -> bf16: round to nearest even first
                    bits = out.to(tl.uint32, bitcast=True)
                    out = (bits + 0x7FFF + ((bits >> 16) & 1)).to(tl.float32, bitcast=True)
                tl.store(y_ptr + offs, out.to(xv.dtype), mask=ok)
                tl.store(m_ptr + offs, (acc > 0).to(tl.uint8), mask=ok)
        tl.debug_barrier()  # slice i is written: the next slice reads it (other threads' rows)


def _backward_kernel(g_ptr, m_ptr, d_ptr, w_ptr, L, S, C,
                     K: tl.constexpr, REVERSE: tl.constexpr, BLOCK_S: tl.constexpr,
                     BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr, IEEE: tl.constexpr,
                     UPCAST: tl.constexpr, ACC64: tl.constexpr):
    """In place on ``g`` (dL/d y -> dL/d x): for the slices in the reverse of the sweep
    order, ``g[prev] += sum_t (m[i] * g[i])[. + t - pad] @ w[t]`` with ``w`` the flipped,
    transposed taps, and ``d[i] = m[i] * g[i]`` (every slice). ``BLOCK_CO`` tiles the
    channels written (dL/d y[prev]'s), ``BLOCK_CI`` the channels summed over."""
    n = tl.program_id(0)
    item = S * C
    slice_stride = tl.num_programs(0) * item
    g_ptr += n * item
    m_ptr += n * item
    d_ptr += n * item
    rs = tl.arange(0, BLOCK_S)
    rco = tl.arange(0, BLOCK_CO)
    rci = tl.arange(0, BLOCK_CI)
    for j in range(0, L):
        if REVERSE:  # the forward went L-1 .. 0 and slice i read i + 1
            i = j
            prev = i + 1
        else:
            i = L - 1 - j
            prev = i - 1
        for s0 in range(0, S, BLOCK_S):
            for c0 in range(0, C, BLOCK_CO):
                co_ok = (c0 + rco) < C
                offs = i * slice_stride + (s0 + rs)[:, None] * C + (c0 + rco)[None, :]
                ok = ((s0 + rs) < S)[:, None] & co_ok[None, :]
                gv = tl.load(g_ptr + offs, mask=ok, other=0.0)
                mv = tl.load(m_ptr + offs, mask=ok, other=0)
                tl.store(d_ptr + offs, tl.where(mv != 0, gv, 0.0).to(gv.dtype), mask=ok)
                if (prev >= 0) & (prev < L):
                    if ACC64:
                        acc = tl.full((BLOCK_S, BLOCK_CO), 0, tl.float64)
                    else:
                        acc = tl.full((BLOCK_S, BLOCK_CO), 0, tl.float32)
                    for t in tl.static_range(K):
                        rows = s0 + rs + (t - K // 2)
                        row_ok = (rows >= 0) & (rows < S)
                        for ci0 in range(0, C, BLOCK_CI):
                            ci_ok = (ci0 + rci) < C
                            a_offs = i * slice_stride + rows[:, None] * C + (ci0 + rci)[None, :]
                            a_ok = row_ok[:, None] & ci_ok[None, :]
                            a = tl.load(g_ptr + a_offs, mask=a_ok, other=0.0)
                            am = tl.load(m_ptr + a_offs, mask=a_ok, other=0)
                            a = tl.where(am != 0, a, 0.0).to(gv.dtype)
                            w = tl.load(w_ptr + t * C * C + (ci0 + rci)[:, None] * C + (c0 + rco)[None, :],
                                        mask=ci_ok[:, None] & co_ok[None, :], other=0.0)
                            if UPCAST:
                                a = a.to(tl.float32)
                                w = w.to(tl.float32)
                            if IEEE:
                                acc = tl.dot(a, w, acc, input_precision="ieee")
                            else:
                                acc = tl.dot(a, w, acc)
                    p_offs = prev * slice_stride + (s0 + rs)[:, None] * C + (c0 + rco)[None, :]
                    gp = tl.load(g_ptr + p_offs, mask=ok, other=0.0)
                    gsum = gp.to(acc.dtype) + acc
                    if UPCAST:  # as in the forward: the interpreter's bf16 cast truncates
                        bits = gsum.to(tl.uint32, bitcast=True)
                        gsum = (bits + 0x7FFF + ((bits >> 16) & 1)).to(tl.float32, bitcast=True)
                    tl.store(g_ptr + p_offs, gsum.to(gp.dtype), mask=ok)
        tl.debug_barrier()  # g[prev] is final: the next slice reads it (other threads' rows)


_KERNELS: dict[bool, tuple[Any, Any]] = {}


def _kernels() -> tuple[Any, Any]:
    """The jitted (forward, backward) kernels for the current interpreter mode (see the
    module docstring: Triton reads TRITON_INTERPRET when it decorates)."""
    mode = _interpreting()
    if mode not in _KERNELS:
        _KERNELS[mode] = (triton.jit(_forward_kernel), triton.jit(_backward_kernel))
    return _KERNELS[mode]


def _pow2(v: int, lo: int, hi: int) -> int:
    """The power of two >= ``v``, clamped to ``[lo, hi]`` (tl.dot needs tiles of >= 16)."""
    return max(lo, min(hi, 1 << max(v - 1, 0).bit_length()))


def _launch(kernel_index: int, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, taps: torch.Tensor,
            reverse: bool, block_s: int | None, block_c: int | None, fp32_precision: str,
            num_warps: int) -> None:
    length, n, s, ch = a.shape
    k = taps.shape[0]
    for t in (a, b, c):
        if not t.is_contiguous() or t.shape != a.shape:
            raise ValueError(f"Triton sweep expects contiguous [L, N, S, C] tensors of one shape, "
                             f"got {tuple(t.shape)} against {tuple(a.shape)}")
    if taps.shape != (k, ch, ch) or not taps.is_contiguous() or taps.dtype != a.dtype:
        raise ValueError(f"Triton sweep expects contiguous taps [k, {ch}, {ch}] in {a.dtype}, "
                         f"got {tuple(taps.shape)} {taps.dtype}")
    if a.numel() >= 2**31 or taps.numel() >= 2**31:
        raise ValueError(f"Triton sweep uses int32 offsets: {tuple(a.shape)} is too large")
    if fp32_precision not in ("ieee", "tf32"):
        raise ValueError(f"fp32_precision must be 'ieee' or 'tf32', got {fp32_precision!r}")
    if length == 0 or n == 0 or s == 0 or ch == 0:
        return
    check_usable(a)
    bs = block_s or _pow2(s, 16, 128)
    bc = block_c or _pow2(ch, 16, 64)
    interp = _interpreting()
    kernel = _kernels()[kernel_index]
    kernel[(n,)](a, b, c, taps, length, s, ch,
                 K=k, REVERSE=bool(reverse), BLOCK_S=bs, BLOCK_CO=bc, BLOCK_CI=bc,
                 IEEE=a.dtype == torch.float64 or (a.dtype == torch.float32 and fp32_precision == "ieee"),
                 UPCAST=interp and a.dtype == torch.bfloat16, ACC64=a.dtype == torch.float64,
                 num_warps=num_warps, num_stages=1)


def sweep_forward(x: torch.Tensor, taps: torch.Tensor, reverse: bool, out: torch.Tensor | None = None, *,
                  mask: torch.Tensor | None = None, block_s: int | None = None, block_c: int | None = None,
                  fp32_precision: str = "ieee", num_warps: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """One sweep ``y[i] = x[i] + relu(conv_k(y[prev]))`` over the slices of ``x``.

    Args:
        x: ``[L, N, S, C]`` contiguous (slices, items, conv axis, channels).
        taps: ``[k, C_in, C_out]`` (odd ``k``), contiguous, ``x``'s dtype.
        reverse: sweep from slice ``L - 1`` down to 0 (``prev = i + 1``).
        out: where to write ``y`` (may be ``x``: in place); a new tensor if None.
        mask: where to write the relu' mask (uint8, ``x``'s shape); a new tensor if None.
        block_s, block_c: tile sizes (powers of two >= 16; default by shape).

    Returns:
        ``(y, mask)``: the sweep's output and the relu' mask (uint8 0/1, 0 on the first slice).
    """
    y = torch.empty_like(x) if out is None else out
    if mask is None:
        mask = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    elif mask.dtype != torch.uint8:
        raise ValueError(f"Triton sweep writes a uint8 mask, got {mask.dtype}")
    _launch(0, x, y, mask, taps, reverse, block_s, block_c, fp32_precision, num_warps)
    return y, mask


def sweep_backward(grad: torch.Tensor, mask: torch.Tensor, taps: torch.Tensor, reverse: bool, *,
                   dconv: torch.Tensor | None = None, block_s: int | None = None, block_c: int | None = None,
                   fp32_precision: str = "ieee", num_warps: int = 4) -> torch.Tensor:
    """Turns ``grad`` (dL/d y, ``[L, N, S, C]``) into dL/d x in place; returns ``dconv``,
    ``mask * dL/d y`` per slice (what each slice's convolution output received).

    ``taps`` are the forward's ``[k, C_in, C_out]``; ``mask`` the forward's relu' mask;
    ``dconv`` where to write it (a new tensor if None)."""
    taps_t = taps.flip(0).transpose(1, 2).contiguous()  # conv^T as a correlation
    if dconv is None:
        dconv = torch.empty_like(grad)
    elif dconv.dtype != grad.dtype:
        raise ValueError(f"Triton sweep writes dconv in the gradient's dtype {grad.dtype}, got {dconv.dtype}")
    _launch(1, grad, mask, dconv, taps_t, reverse, block_s, block_c, fp32_precision, num_warps)
    return dconv


def weight_grad(out: torch.Tensor, dconv: torch.Tensor, reverse: bool, kernel: int) -> torch.Tensor:
    """dL/d taps ``[k, C_in, C_out]`` of one sweep, all slices in one library call: slice ``i``
    convolved ``out[prev]`` and its output received ``dconv[i]``; the ``(L-1)*N`` item slices
    are a batch of channels-last ``[C, 1, S]`` images, the k//2 zero padding is the conv's."""
    length, n, s, c = out.shape
    if length < 2 or n == 0 or s == 0:
        return out.new_zeros((kernel, c, c))
    src, dst = (out[1:], dconv[:-1]) if reverse else (out[:-1], dconv[1:])
    src = src.reshape((length - 1) * n, s, c).permute(0, 2, 1).unsqueeze(2)
    dst = dst.reshape((length - 1) * n, s, c).permute(0, 2, 1).unsqueeze(2)
    grad_w = torch.nn.grad.conv2d_weight(src, (c, c, 1, kernel), dst, padding=(0, kernel // 2))
    return grad_w[:, :, 0, :].permute(2, 1, 0)
