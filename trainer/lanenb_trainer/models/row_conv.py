"""The per-slice convolution of SCNN message passing: a ``k``-tap 1-D convolution with full
channel mixing over the rows of one ``[R, C]`` slice, ``y[i] = sum_t x[i + t] @ taps[t]``.

Why a module of its own: the sweeps call it once per slice, one slice after another (each
slice reads the previous one's output), so its speed is the sweeps' speed, and there are three
ways to compute it with one interface:

* :class:`DirectRowConv`: one library convolution call per slice (oneDNN / cuDNN);
* :class:`WinogradRowConv`: the Winograd / Toom-Cook algorithm F(3, 3), one level, for kernels of
  ``3 * s`` taps (SCNN's 9 = three 3-tap segments). Rows are cut into tiles of 3 outputs;
  each 5-row input window is transformed once (``B^T``, exact small integers) and serves all
  ``s`` segments, because a segment is 3 taps further along, exactly one tile. The channel
  mixing becomes 5 matrix products per tile per segment instead of 9 per 3 outputs: 1.8x
  fewer multiply-adds, run as one grouped library convolution over the tiles. The output
  transform ``A^T`` (also small integers) gives the 3 outputs. The filter transform ``G``
  (fractions, applied once per call) carries all the divisions, so float32 results stay
  within ~2e-6 relative of the direct convolution (float64: ~1e-15);
* :class:`NestedWinogradRowConv`: for exactly 9 taps, F(3, 3) once more over groups of 3
  tiles (25 products per 9 outputs instead of 45), as three batched matrix products per
  slice with no convolution primitive and no weight reorder; float32 within ~4e-6.

:func:`row_conv` picks: Winograd on the CPU for float32/float64 with ``k % 3 == 0`` and
enough channels and rows to pay for the transforms (nested for 9 taps), else direct (cuDNN
has its own fast paths; bf16 would lose too much to the transforms). On the CPU the direct
and one-level forms run on weights packed into oneDNN's layout once per sweep (:class:`_Conv`).

All work on a zero-framed slice buffer ``[L, R_alloc, C]`` (``L`` slices; rows ``0..R-1``
hold the data and its zero frame, plus up to eight zero rows so that the ``R - k + 1`` outputs
fill whole tiles or groups and the rows are a multiple of 3, see :func:`alloc_rows`): ``inputs(buf)``
and ``targets(buf)`` make the per-slice views once per sweep, ``conv(inputs[i])`` returns the
``R - k + 1`` outputs, ``conv.relu(inputs[i])`` their relu as fresh rows (the forward's call;
whole tiles or groups, so a few rows more), and ``conv.add_to(inputs[i], targets(buf)[j])``
accumulates them (the backward's ``G[prev] += conv^T(...)``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .scratch import Scratch, scratch_or_new

__all__ = ["ALGORITHMS", "DirectRowConv", "NestedWinogradRowConv", "RowConv", "WinogradRowConv", "WinogradTiling",
           "alloc_rows", "auto_algorithm", "check_algorithm", "row_conv", "weight_grad", "winograd_weight_grad_fits"]

# "triton" is not a per-slice convolution: it runs each whole sweep as one Triton kernel
# (message_passing with algorithm="triton", see sweep_triton); "auto" never picks it.
ALGORITHMS = ("auto", "direct", "winograd", "triton")
_TILE = 3  # outputs per tile (= taps per segment, so segments share input windows)
_WINDOW = 5  # F(3, 3): 3 + 3 - 1 input rows per tile, 5 transformed points
_MIN_WINOGRAD_CHANNELS = 128  # fewer (64 measured): the transforms cost more than the products save
_MIN_WINOGRAD_ROWS = 128  # fewer (108 measured): the same
# 9 taps, nested (channels, rows): 1.1-1.8x the direct conv's speed from 32 rows at 64 and 128
# channels (issue 35, AVX2, 2 threads; 0.9x at 24 rows, 128 channels, 1 thread)
_MIN_NESTED = (32, 32)
_MIN_WINOGRAD_WGRAD_ROWS = 64  # the weight gradient over all slices: faster from 84 rows (measured)

# Toom-Cook F(3, 3) at the points 0, 1, -1, 2 and infinity (correlation form:
# y = A^T [(G g) * (B^T d)] for 3 outputs y, 3 taps g, 5 inputs d). B^T's rows are scaled
# by 2, 2, 6, 6, 1 and G's by the inverse, so the per-slice transforms are exact integers.
_AT = ((1, 1, 1, 1, 0),
       (0, 1, -1, 2, 0),
       (0, 1, 1, 4, 1))
_G = ((1 / 2, 0, 0),
      (1 / 2, 1 / 2, 1 / 2),
      (1 / 6, -1 / 6, 1 / 6),
      (1 / 6, 1 / 3, 2 / 3),
      (0, 0, 1))
_BT = ((2, -1, -2, 1, 0),
       (0, 2, 1, -1, 0),
       (0, -2, 3, -1, 0),
       (0, -1, 0, 1, 0),
       (0, 2, -1, -2, 1))


def _nested(left: tuple[tuple[float, ...], ...], right: tuple[tuple[float, ...], ...],
            step: int) -> tuple[tuple[float, ...], ...]:
    """The Kronecker product of two transforms applied one after the other along one row
    axis: ``out[(P, xi), step * q + r] += left[P][q] * right[xi][r]``. Why: the nested forms
    (:class:`NestedWinogradRowConv`, the 9-tap :meth:`WinogradTiling.weight_grad`) transform
    the rows twice, at a step of 3 (``right``, within a tile or window) and of 9 (``left``,
    across 3 of them); one product with this matrix does both in one call."""
    cols = step * (len(left[0]) - 1) + len(right[0])
    out = [[0.0] * cols for _ in range(len(left) * len(right))]
    for big, left_row in enumerate(left):
        for small, right_row in enumerate(right):
            for q, lv in enumerate(left_row):
                for r, rv in enumerate(right_row):
                    out[big * len(right) + small][step * q + r] += lv * rv
    return tuple(tuple(row) for row in out)


_A = tuple(zip(*_AT))  # A = (A^T)^T: the tile transform of the weight gradient
_NESTED_TAPS = _TILE * _TILE  # 9 taps = 3 segments of 3: the kernel that nests twice
_BT2 = _nested(_BT, _BT, _TILE)  # [25, 17]: a 17-row window at a step of 9 -> 5 x 5 points
_A2 = _nested(_A, _A, _TILE)  # [25, 9]: a 9-row tile -> 5 x 5 points
_AT2 = tuple(zip(*_A2))  # [9, 25]: 5 x 5 points -> 9 outputs
_G2 = _nested(_G, _G, _TILE)  # [25, 9]: the 9 taps (as columns) -> 5 x 5 points


@functools.lru_cache(maxsize=64)
def _constant(values: tuple[tuple[float, ...], ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A transform matrix as a tensor, made once per dtype and device. Why cached: building one
    from nested tuples took ~40 us, and a training step built 36 (issue 35: ~1.5 ms of a
    ~51 ms step). Callers only read it (products, ``expand`` views)."""
    return torch.tensor(values, dtype=dtype, device=device)


def alloc_rows(rows: int, kernel: int) -> int:
    """Rows to allocate for a slice of ``rows`` rows: enough zero rows after it that its
    ``rows - kernel + 1`` outputs fill whole tiles (9 taps: whole groups of 9 outputs, read
    through 17-row windows), rounded up to a multiple of 3 (at most eight more rows). Why the
    multiple of 3: slices laid end to end then keep one window grid, so the windows (and
    tiles) of all slices are one strided view for the weight gradient's batched transforms
    (:meth:`WinogradTiling.weight_grad`)."""
    outputs = max(rows - kernel + 1, 0)
    whole = rows + (-outputs) % _TILE
    if kernel == _NESTED_TAPS:  # whole groups of 9 outputs (NestedWinogradRowConv): up to 8 more rows
        whole = max(whole, _NESTED_TAPS * -(-outputs // _NESTED_TAPS) + kernel - 1)
    return whole + (-whole) % _TILE


def _images(buf: torch.Tensor, start: int = 0, stop: int | None = None) -> tuple[torch.Tensor, ...]:
    """Per-slice views of rows ``start:stop`` of every ``[R, C]`` slice as channels-last
    ``[1, C, 1, rows]`` images: what a library conv reads and writes, made once per sweep
    (one ``unbind``) instead of a chain of view ops per slice."""
    return buf[:, start:stop].permute(0, 2, 1).unsqueeze(1).unsqueeze(3).unbind(0)


class _Conv:
    """``F.conv2d(image, weight, groups=groups)`` for one fixed weight and input shape, called
    once per slice: on the CPU in float32 the weight is reordered into oneDNN's blocked layout
    once (``mkldnn_reorder_conv2d_weight``) and the convolution runs on it directly, where
    ``F.conv2d`` reorders the weight again on every call (ONEDNN_VERBOSE shows a reorder
    before each convolution; a 164-row slice took 0.30 ms with it, 0.23 ms without)."""

    def __init__(self, weight: torch.Tensor, image_shape: Sequence[int], groups: int = 1) -> None:
        self.weight, self.groups = weight, groups
        self.packed = _pack(weight, image_shape, groups)

    def __call__(self, image: torch.Tensor, relu: bool = False) -> torch.Tensor:
        """The convolution, with ``relu`` applied to its output (fused into oneDNN's call)."""
        if self.packed is not None:
            try:
                return torch.ops.mkldnn._convolution_pointwise(
                    image, self.packed, None, [0, 0], [1, 1], [1, 1], self.groups, "relu" if relu else "none",
                    [], "")
            except (RuntimeError, TypeError):  # an internal op that changed under another torch:
                self.packed = None  # the public path from now on (it raises real errors itself)
        out = F.conv2d(image, self.weight, groups=self.groups)
        return out.relu_() if relu else out


def _pack(weight: torch.Tensor, image_shape: Sequence[int], groups: int) -> torch.Tensor | None:
    """The weight in oneDNN's own layout, or None where that path is missing (other devices
    and dtypes, builds without oneDNN, a torch without these internal ops)."""
    if weight.device.type != "cpu" or weight.dtype != torch.float32 or not torch.backends.mkldnn.enabled \
            or not torch.backends.mkldnn.is_available():
        return None
    try:
        _ = torch.ops.mkldnn._convolution_pointwise
        # torch's _nn.pyi omits the op's last argument, input_size (aten schema: SymInt[]? input_size)
        return torch._C._nn.mkldnn_reorder_conv2d_weight(  # type: ignore[call-arg]
            weight.contiguous().to_mkldnn(), [0, 0], [1, 1], [1, 1], groups, list(image_shape))
    except (AttributeError, RuntimeError):
        return None


class DirectRowConv:
    """One library convolution per slice: the slice is a channels-last ``[1, C, 1, R]`` image
    and the taps a ``(1, k)`` kernel, so oneDNN / cuDNN read the overlapping windows
    themselves (an im2col copy + GEMM measured ~10% slower)."""

    def __init__(self, taps: torch.Tensor, rows: int) -> None:
        """``taps``: ``[k, C_in, C_out]``; ``rows``: the slice's rows ``R`` before the
        allocation's extra zero rows."""
        self.kernel, self.rows = taps.shape[0], rows
        weight = taps.permute(2, 1, 0).unsqueeze(2).contiguous()  # what the oneDNN reorder reads
        self.conv = _Conv(weight, (1, taps.shape[1], 1, rows))

    def inputs(self, buf: torch.Tensor) -> Sequence[torch.Tensor]:
        return _images(buf, 0, self.rows)

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return self.conv(image)

    def relu(self, image: torch.Tensor) -> torch.Tensor:
        """``relu(conv(image))`` as a fresh ``[R - k + 1, C_out]`` row matrix (the relu fused
        into the library call): the forward keeps it for the backward's relu'."""
        return self.conv(image, relu=True).permute(0, 2, 3, 1).reshape(-1, self.conv.weight.shape[0])

    def targets(self, buf: torch.Tensor) -> Sequence[torch.Tensor]:
        """Per-slice views that :meth:`add_to` accumulates into (the output rows)."""
        pad = self.kernel // 2
        return _images(buf, pad, self.rows - pad)

    def add_to(self, image: torch.Tensor, target: torch.Tensor) -> None:
        target.add_(self.conv(image))

    def weight_grad(self, inputs: torch.Tensor, grads: torch.Tensor, scratch: Scratch | None = None) -> torch.Tensor:
        """dL/d taps of a convolution of this one's geometry: in the Winograd domain where
        :func:`winograd_weight_grad_fits` (:meth:`WinogradTiling.weight_grad`), else
        :func:`weight_grad`. Why not simply as the convolution ran: the per-slice Winograd
        convolution does not pay at the quickstart's 84-row slices, yet the weight gradient
        over all slices at once does (issue 35, AVX2, 2 threads: the whole pass at 4x128x16x40
        best of 40, 66 -> 62 ms)."""
        if winograd_weight_grad_fits(inputs, self.kernel, self.rows):
            return WinogradTiling(self.kernel, self.rows).weight_grad(inputs, grads, scratch)
        return weight_grad(inputs, grads, self.kernel)


class WinogradTiling:
    """The F(3, 3) tiling of ``rows``-row slices for ``k = 3 * s`` taps: outputs, tiles of 3,
    5-row windows at a step of 3. Why a class of its own: the weight gradient needs only this
    geometry, not a built convolution, so a sweep whose slices ran the direct convolution still
    gets its weight gradient in the Winograd domain (:meth:`DirectRowConv.weight_grad`)."""

    def __init__(self, kernel: int, rows: int) -> None:
        if kernel % _TILE:
            raise ValueError(f"Winograd row convolution needs a multiple of 3 taps, got {kernel}")
        self.kernel, self.rows, self.segments = kernel, rows, kernel // _TILE
        self.outputs_n = max(rows - kernel + 1, 0)
        self.tiles = -(-self.outputs_n // _TILE)
        self.windows = self.tiles + self.segments - 1

    @staticmethod
    def _matrix(values: tuple[tuple[float, ...], ...], like: torch.Tensor) -> torch.Tensor:
        """One of the transforms' constant matrices in ``like``'s dtype and device (read only)."""
        return _constant(values, like.dtype, like.device)

    def weight_grad(self, inputs: torch.Tensor, grads: torch.Tensor, scratch: Scratch | None = None) -> torch.Tensor:
        """dL/d taps ``[k, C_in, C_out]`` of a row convolution of this geometry over ``S``
        slices at once, whichever algorithm ran it (it reads no taps, so the backward's conv^T
        serves), computed in the Winograd domain: 1.8x fewer multiply-adds than
        :func:`weight_grad`, 3.2x for SCNN's 9 taps (nested, below).

        Why it pays: the slices lie end to end with a multiple of 3 rows each
        (:func:`alloc_rows`), so the windows of all slices are one strided view at a step of 3
        rows, and so are the output tiles; each transform is one batched product over all
        slices (no copy) and each of the ``5 s`` point products one GEMM, tile ``w`` against
        window ``w + j`` for segment ``j``. Tiles past a slice's outputs, including those that
        straddle two slices, read only the gradient's zero frame and add nothing.

        With 9 taps (3 segments) the sum over tiles is itself a 3-tap correlation (segment
        ``j`` pairs tile ``w`` with window ``w + j``), so it is transformed once more, F(3, 3)
        over groups of 3 tiles: 25 point products over a third as many rows instead of 15,
        each transform pair one product with a Kronecker matrix (:func:`_nested`) and the 25
        products one batched GEMM. Issue 35, AVX2, 2 threads (best of 30, interleaved): 39
        slices of 84 rows 5.9 -> 4.2 ms, 15 of 180 rows 4.6 -> 3.4 ms; float32 within ~4e-6
        of float64 at the largest (the one-level form: ~1e-6).

        Args:
            inputs: ``[S, R_alloc, C_in]``, contiguous: the slices the convolution read.
            grads: ``[S, R_alloc, C_out]``, contiguous: dL/d its outputs in rows ``k // 2``
                onwards, zero in every other row (the zero frame, and the up to two rows past
                the outputs that whole tiles reach).
            scratch: where to keep the transformed windows, tiles and point products between
                calls (else new).

        Raises:
            ValueError: slices not laid out by :func:`alloc_rows` for this geometry.
        """
        n_slices, r_alloc, c_in = inputs.shape
        c_out, k = grads.shape[2], self.kernel
        if n_slices == 0 or self.outputs_n == 0:
            return inputs.new_zeros((k, c_in, c_out))
        if r_alloc % _TILE or r_alloc < _TILE * self.windows + 2 or grads.shape[:2] != inputs.shape[:2]:
            raise ValueError(f"slices {tuple(inputs.shape)} / {tuple(grads.shape)} are not laid out "
                             f"for {self.windows} windows (alloc_rows)")
        rows_all = n_slices * r_alloc
        x, g = inputs.reshape(rows_all, c_in), grads.reshape(rows_all, c_out)
        if self.segments == _TILE:
            return self._nested_weight_grad(x, g, r_alloc, scratch)
        pad = k // 2
        n_windows = rows_all // _TILE - 1  # the last would run past the end
        windows = x.as_strided((n_windows, _WINDOW, c_in), (_TILE * c_in, c_in, 1), x.storage_offset())
        d = scratch_or_new(scratch, "wgrad windows", (n_windows, _WINDOW, c_in), inputs)
        torch.bmm(self._matrix(_BT, inputs).expand(n_windows, _WINDOW, _WINDOW), windows, out=d)  # B^T per window
        n_tiles = (rows_all - pad) // _TILE
        tiles = g[pad:pad + _TILE * n_tiles].view(n_tiles, _TILE, c_out)
        m = scratch_or_new(scratch, "wgrad tiles", (n_tiles, _WINDOW, c_out), grads)
        torch.bmm(self._matrix(_A, grads).expand(n_tiles, _WINDOW, _TILE), tiles, out=m)  # A per tile
        n = min(n_tiles, n_windows - self.segments + 1)
        du = scratch_or_new(scratch, "wgrad points", (self.segments, _WINDOW, c_in, c_out), inputs)
        for j in range(self.segments):
            for xi in range(_WINDOW):
                torch.mm(d[j:j + n, xi].t(), m[:n, xi], out=du[j, xi])
        # G^T back to the taps: taps[3j + v] gets sum_xi G[xi, v] dU[j, xi]
        grad = torch.matmul(self._matrix(_G, inputs).t(), du.view(self.segments, _WINDOW, c_in * c_out))
        return grad.view(k, c_in, c_out)

    def _nested_weight_grad(self, x: torch.Tensor, g: torch.Tensor, r_alloc: int,
                            scratch: Scratch | None) -> torch.Tensor:
        """:meth:`weight_grad` for 9 taps on the flattened rows ``x`` ``[rows, C_in]`` and
        ``g`` ``[rows, C_out]``: groups of 9 outputs (3 tiles), each read through a 17-row
        window at a step of 9 (5 windows of 5 rows at a step of 3); the up to 16 outputs that
        no whole group covers at the end are added directly (one batched product)."""
        rows_all, c_in = x.shape
        c_out, k, pad = g.shape[1], self.kernel, self.kernel // 2
        group, span, points = _TILE * _TILE, _TILE * (_WINDOW - 1) + _WINDOW, _WINDOW * _WINDOW
        n_out = rows_all - r_alloc + self.outputs_n  # through the last slice's last output
        groups = max(min((rows_all - pad) // group, (rows_all - span) // group + 1, -(-n_out // group)), 0)
        # The products come out [C_out, C_in] per point and the taps [C_out, C_in, k]: the conv
        # weight's own layout, so autograd hands the gradient to the weight without a copy.
        du = scratch_or_new(scratch, "wgrad points", (points, c_out, c_in), x)
        if groups:
            windows = x.as_strided((groups, span, c_in), (group * c_in, c_in, 1), x.storage_offset())
            d = scratch_or_new(scratch, "wgrad windows", (groups, points, c_in), x)
            torch.bmm(self._matrix(_BT2, x).expand(groups, points, span), windows, out=d)
            tiles = g[pad:pad + group * groups].view(groups, group, c_out)
            m = scratch_or_new(scratch, "wgrad tiles", (groups, points, c_out), g)
            torch.bmm(self._matrix(_A2, g).expand(groups, points, group), tiles, out=m)
            torch.bmm(m.transpose(0, 1).transpose(1, 2), d.transpose(0, 1), out=du)  # the 25 point products
            by_out = torch.mm(du.view(points, c_out * c_in).t(), self._matrix(_G2, x))  # [C_out C_in, k]
            grad = by_out.view(c_out, c_in, k).permute(2, 1, 0)
        else:
            grad = x.new_zeros((k, c_in, c_out))
        rest = n_out - group * groups
        if rest > 0:  # tap t: x[start + t + i] against g[pad + start + i], i < rest
            start = group * groups
            shifted = x.as_strided((k, rest, c_in), (c_in, c_in, 1), x.storage_offset() + start * c_in)
            grad += torch.bmm(shifted.transpose(1, 2), g[pad + start:pad + start + rest].expand(k, rest, c_out))
        return grad


class _WinogradConv(WinogradTiling):
    """What both Winograd forms do once their ``_products`` has given the points before the
    output transform: that transform (``self.at``, batched over tiles or groups) as one
    product into fresh rows, through the relu, or summed into a target. Subclasses set ``at``
    and ``c_out``."""

    at: torch.Tensor
    c_out: int

    def _products(self, windows: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _rows(self, windows: torch.Tensor) -> torch.Tensor:
        """All outputs of whole tiles or groups as fresh rows ``[rows, C_out]`` (a few rows
        past the slice's outputs)."""
        return torch.bmm(self.at, self._products(windows)).view(-1, self.c_out)

    def __call__(self, windows: torch.Tensor) -> torch.Tensor:
        """The slice's outputs ``[R - k + 1, C_out]`` (fresh)."""
        return self._rows(windows)[:self.outputs_n]

    def relu(self, windows: torch.Tensor) -> torch.Tensor:
        """``relu(conv(windows))`` as fresh rows, whole tiles or groups (up to eight rows past the
        outputs): the forward keeps it for the backward's relu'."""
        return self._rows(windows).relu_()

    def add_to(self, windows: torch.Tensor, target: torch.Tensor) -> None:
        """``target += conv(windows)``, the output transform and the sum in one call (``target``
        from the subclass's ``targets``: whole tiles or groups)."""
        target.baddbmm_(self.at, self._products(windows))


class WinogradRowConv(_WinogradConv):
    """Winograd F(3, 3), one level, the segments sharing windows (see the module docstring),
    for ``k = 3 * s`` taps."""

    def __init__(self, taps: torch.Tensor, rows: int, scratch: Scratch | None = None) -> None:
        """``taps``: ``[k, C_in, C_out]``; ``rows``: the slice's rows ``R``; ``scratch``: where
        the filter transform's and the slices' buffers are reused from (else new); this
        object then uses them until the next convolution built on the same scratch."""
        k, c_in, c_out = taps.shape
        super().__init__(k, rows)
        # Filter transform (once per call): U[j, xi] = sum_v G[xi, v] taps[3j + v], one matmul
        # in the taps' dtype, then one strided copy into the grouped conv's weight: group xi,
        # out channel xi * C_out + o, in channel i, kernel (1, s), plain contiguous (what the
        # oneDNN reorder reads; an einsum into a channels-last weight cost more copies: building
        # one 128-channel convolution, which every sweep does forward and backward, measured
        # 1.6 ms before and 0.9 ms after, alone, AVX2, one thread). In float64 for float32 taps
        # it cost 0.1 ms more a build and changed no result beyond float32's own rounding.
        g = self._matrix(_G, taps)
        flat = scratch_or_new(scratch, "winograd taps", (self.segments, _TILE, c_in * c_out), taps)
        flat.view(k, c_in, c_out).copy_(taps)
        u = scratch_or_new(scratch, "winograd U", (self.segments, _WINDOW, c_in * c_out), taps)
        torch.matmul(g, flat, out=u)  # [s, 5, C_in C_out]
        weight = scratch_or_new(scratch, "winograd weight", (_WINDOW, c_out, c_in, self.segments), taps)
        weight.copy_(u.view(self.segments, _WINDOW, c_in, c_out).permute(1, 3, 2, 0))
        weight = weight.view(_WINDOW * c_out, c_in, 1, self.segments)
        self.conv = _Conv(weight, (1, _WINDOW * c_in, 1, self.windows), groups=_WINDOW)
        self.c_out = c_out
        # Scratch reused by every slice of the sweep (stays in cache; no per-slice allocation).
        self.bt = self._matrix(_BT, taps).expand(self.windows, _WINDOW, _WINDOW)
        self.at = self._matrix(_AT, taps).expand(self.tiles, _TILE, _WINDOW)
        self.d = scratch_or_new(scratch, "winograd windows", (self.windows, _WINDOW, c_in), taps)
        self.d_image = self.d.view(1, 1, self.windows, _WINDOW * c_in).permute(0, 3, 1, 2)

    def inputs(self, buf: torch.Tensor) -> Sequence[torch.Tensor]:
        """Per slice, the overlapping 5-row windows at a step of 3 rows: ``[Q, 5, C]`` views."""
        length, r_alloc, c = buf.shape
        if not buf.is_contiguous() or r_alloc < _TILE * self.windows + 2:
            raise ValueError(f"slice buffer {tuple(buf.shape)} is not laid out for {self.windows} windows")
        return buf.as_strided((length, self.windows, _WINDOW, c), (r_alloc * c, _TILE * c, c, 1),
                              buf.storage_offset()).unbind(0)

    def _products(self, windows: torch.Tensor) -> torch.Tensor:
        """Input transform and channel products: ``[T, 5, C_out]``, before the output transform."""
        torch.bmm(self.bt, windows, out=self.d)  # [Q, 5, C_in]: 5 transformed points per window
        m = self.conv(self.d_image)  # [1, 5 C_out, 1, T] channels-last
        return m.permute(0, 2, 3, 1).view(self.tiles, _WINDOW, self.c_out)

    def targets(self, buf: torch.Tensor) -> Sequence[torch.Tensor]:
        """Per-slice ``[T, 3, C]`` views of the output rows, whole tiles: up to two rows past
        the outputs, into the zero frame (:meth:`add_to` adds the extra outputs there; the
        backward never reads its gradient buffer's frame rows)."""
        pad = self.kernel // 2
        length, _, c = buf.shape
        return buf[:, pad:pad + self.tiles * _TILE].view(length, self.tiles, _TILE, c).unbind(0)


class NestedWinogradRowConv(_WinogradConv):
    """Winograd F(3, 3) nested twice, for SCNN's 9 taps: 25 products per 9 outputs where the
    one-level form (:class:`WinogradRowConv`) needs 45 and the direct convolution 81.

    Why it nests: the one-level form's sum over the 3 segments is itself a 3-tap correlation
    over tiles (segment ``j`` pairs tile ``w`` with window ``w + j``), so groups of 3 tiles (9
    outputs) are transformed once more. Each 17-row window at a step of 9 becomes 25 points
    with one Kronecker matrix (:func:`_nested`), each point is one ``[groups, C_in] @ [C_in,
    C_out]`` product (the 25 as one batched GEMM), and one more matrix gives the 9 outputs.
    The three steps are plain batched matrix products (no convolution primitive), and the
    filter transform is one small GEMM straight from the taps (no oneDNN weight reorder).
    Issue 35, AVX2, 2 threads (best of 30, interleaved): a 84-row slice 118 us against 136
    for the direct convolution and 123 for one level, a 180-row slice 176 against 257 and
    206; building it 150 us against 370 for one level. float32 within ~4e-6 of float64.
    """

    def __init__(self, taps: torch.Tensor, rows: int, scratch: Scratch | None = None) -> None:
        """``taps``: ``[9, C_in, C_out]``; ``rows``: the slice's rows ``R``; ``scratch``: where
        the transformed filter and the per-slice points are kept (else new)."""
        k, c_in, c_out = taps.shape
        if k != _NESTED_TAPS:
            raise ValueError(f"nested Winograd row convolution needs {_NESTED_TAPS} taps, got {k}")
        super().__init__(k, rows)
        self.groups, self.c_out = -(-self.outputs_n // _NESTED_TAPS), c_out
        self.span = _NESTED_TAPS + k - 1  # input rows of one group of 9 outputs
        points = _WINDOW * _WINDOW
        self.u = _nested_filter(self._matrix(_G2, taps), taps, scratch)  # [25, C_in, C_out]
        self.bt = self._matrix(_BT2, taps).expand(self.groups, points, self.span)
        self.at = self._matrix(_AT2, taps).expand(self.groups, _NESTED_TAPS, points)
        self.d = scratch_or_new(scratch, "nested windows", (self.groups, points, c_in), taps)
        self.m = scratch_or_new(scratch, "nested products", (points, self.groups, c_out), taps)
        self.d_by_point, self.m_by_group = self.d.transpose(0, 1), self.m.transpose(0, 1)  # views, made once

    def inputs(self, buf: torch.Tensor) -> Sequence[torch.Tensor]:
        """Per slice, the overlapping 17-row windows at a step of 9 rows: ``[G, 17, C]`` views."""
        length, r_alloc, c = buf.shape
        if not buf.is_contiguous() or r_alloc < _NESTED_TAPS * (self.groups - 1) + self.span:
            raise ValueError(f"slice buffer {tuple(buf.shape)} is not laid out for {self.groups} groups "
                             "of 9 outputs (alloc_rows)")
        return buf.as_strided((length, self.groups, self.span, c), (r_alloc * c, _NESTED_TAPS * c, c, 1),
                              buf.storage_offset()).unbind(0)

    def _products(self, windows: torch.Tensor) -> torch.Tensor:
        """Input transform and the 25 point products: ``[G, 25, C_out]`` (a view of scratch)."""
        torch.bmm(self.bt, windows, out=self.d)
        torch.bmm(self.d_by_point, self.u, out=self.m)
        return self.m_by_group

    def targets(self, buf: torch.Tensor) -> Sequence[torch.Tensor]:
        """Per-slice ``[G, 9, C]`` views of the output rows, whole groups: up to eight rows past
        the outputs, into the zero frame (see :meth:`WinogradRowConv.targets`)."""
        pad = self.kernel // 2
        length, _, c = buf.shape
        return buf[:, pad:pad + self.groups * _NESTED_TAPS].view(length, self.groups, _NESTED_TAPS, c).unbind(0)


def _nested_filter(g2: torch.Tensor, taps: torch.Tensor, scratch: Scratch | None) -> torch.Tensor:
    """``U[p] = sum_t g2[p, t] taps[t]``: ``[25, C_in, C_out]``, one GEMM that reads the taps
    where they lie. Why the two layouts: the forward's taps are a permuted view of the conv's
    ``[C_out, C_in, 1, 9]`` weight and the backward's a flipped copy of it transposed; either
    way the 9 taps of one channel pair are contiguous, so the GEMM reads them as they are and
    its output is the product's operand or that operand transposed (a view), no copy."""
    k, c_in, c_out = taps.shape
    u = scratch_or_new(scratch, "nested filter", (g2.shape[0], c_in * c_out), taps)
    by_in, by_out = taps.permute(1, 2, 0), taps.permute(2, 1, 0)  # [C_in, C_out, k], [C_out, C_in, k]
    if by_out.is_contiguous():
        torch.mm(g2, by_out.reshape(c_out * c_in, k).t(), out=u)
        return u.view(-1, c_out, c_in).transpose(1, 2)
    torch.mm(g2, by_in.reshape(c_in * c_out, k).t(), out=u)  # (a copy unless [C_in, C_out, k] lies contiguous)
    return u.view(-1, c_in, c_out)


RowConv = DirectRowConv | WinogradRowConv | NestedWinogradRowConv


def weight_grad(inputs: torch.Tensor, grads: torch.Tensor, kernel: int) -> torch.Tensor:
    """dL/d taps ``[k, C_in, C_out]`` of a direct row convolution over ``S`` slices at once
    (after the sequential pass: ``k`` matrix products instead of one op per slice).

    Why products over the flattened slices: the ``S`` slices lie end to end in memory, so the
    rows that tap ``t`` read for every output of every slice are one contiguous ``[S R, C]``
    block shifted by ``t`` rows, and ``dL/d taps[t] = X[t:t+n]^T @ G[pad:pad+n]`` is one GEMM
    on views, no copies. Windows that straddle two slices meet only zero rows of ``G`` (the
    zero frame), so they add nothing. Issue 35, AVX2, 2 threads: 6.0 -> 5.4 ms at 39 slices of
    84 rows and 5.3 -> 4.4 ms at 15 of 180, against the library's conv weight gradient (which
    measured ~25% faster than ``k`` GEMMs on im2col copies).

    Args:
        inputs: ``[S, R_alloc, C_in]``, the slices the convolution read.
        grads: ``[S, R_alloc, C_out]``, dL/d its outputs in rows ``k // 2`` onwards (the
            layout's output rows), zero in every other row: the zero frame.
    """
    n_slices, rows, c_in = inputs.shape
    c_out, pad = grads.shape[2], kernel // 2
    if n_slices == 0 or rows - kernel + 1 <= 0:  # nothing was convolved
        return inputs.new_zeros((kernel, c_in, c_out))
    x, g = inputs.reshape(n_slices * rows, c_in), grads.reshape(n_slices * rows, c_out)
    n = n_slices * rows - kernel + 1
    out = inputs.new_empty((kernel, c_in, c_out))
    g_rows = g[pad:pad + n]
    for t in range(kernel):
        torch.mm(x[t:t + n].t(), g_rows, out=out[t])
    return out


def check_algorithm(algorithm: str) -> None:
    """Raises ValueError naming ``algorithm`` unless it is one of :data:`ALGORITHMS`."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"message-passing algorithm must be one of {ALGORITHMS}, got {algorithm!r}")


def auto_algorithm(taps: torch.Tensor, rows: int) -> str:
    """What ``"auto"`` resolves to for ``taps`` ``[k, C_in, C_out]`` over ``rows``-row slices:
    ``"winograd"`` on the CPU for float32/float64 where it measured faster: 9 taps (nested,
    :class:`NestedWinogradRowConv`) from 32 channels and 32 rows, other ``k % 3 == 0`` from 128
    channels and 128 rows; else ``"direct"``."""
    k = taps.shape[0]
    if taps.device.type != "cpu" or taps.dtype not in (torch.float32, torch.float64) or k % _TILE:
        return "direct"
    least = _MIN_NESTED if k == _NESTED_TAPS else (_MIN_WINOGRAD_CHANNELS, _MIN_WINOGRAD_ROWS)
    return "winograd" if taps.shape[1] >= least[0] and rows >= least[1] else "direct"


def winograd_weight_grad_fits(inputs: torch.Tensor, kernel: int, rows: int) -> bool:
    """Whether :class:`DirectRowConv` computes its weight gradient in the Winograd domain: on
    the CPU for float32/float64, ``k % 3 == 0``, at least 128 channels (as for the per-slice
    choice) and :data:`_MIN_WINOGRAD_WGRAD_ROWS` rows, and slices laid out by :func:`alloc_rows`."""
    return (inputs.device.type == "cpu" and inputs.dtype in (torch.float32, torch.float64)
            and kernel % _TILE == 0 and inputs.shape[2] >= _MIN_WINOGRAD_CHANNELS
            and rows >= _MIN_WINOGRAD_WGRAD_ROWS and inputs.shape[1] % _TILE == 0)


def row_conv(taps: torch.Tensor, rows: int, algorithm: str = "auto", scratch: Scratch | None = None) -> RowConv:
    """The row convolution for ``taps`` ``[k, C_in, C_out]`` over slices of ``rows`` rows.

    Args:
        algorithm: ``"direct"``, ``"winograd"`` (needs ``k % 3 == 0``) or ``"auto"``
            (:func:`auto_algorithm`).
        scratch: buffers to build the convolution in (:class:`~.scratch.Scratch`), reused by
            the next one built on it: one sweep's convolution at a time.

    Raises:
        ValueError: an unknown ``algorithm``, ``"winograd"`` with ``k % 3 != 0``, or
            ``"triton"`` (whole sweeps, not a per-slice convolution).
    """
    check_algorithm(algorithm)
    if algorithm == "triton":
        raise ValueError("message-passing algorithm 'triton' runs whole sweeps (sweep_triton), "
                         "not a per-slice row convolution")
    if algorithm == "auto":
        algorithm = auto_algorithm(taps, rows)
    if algorithm == "winograd":
        if taps.shape[0] == _NESTED_TAPS:
            return NestedWinogradRowConv(taps, rows, scratch)
        return WinogradRowConv(taps, rows, scratch)
    return DirectRowConv(taps, rows)
