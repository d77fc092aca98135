"""The Triton sweep (``algorithm="triton"``), run on the CPU by Triton's interpreter: equal to
the published per-slice loop (``plain_message_passing``) forward, and to autograd through it
backward (input and all four weight gradients), every output element written, clear errors.

Interpreter mode: Triton reads ``TRITON_INTERPRET`` when ``triton.jit`` decorates a function.
``sweep_triton`` jits its kernels on first use, cached per mode, so setting the variable per
test (monkeypatch) works whatever was imported first in this pytest process; the kernels use
no ``@triton.jit`` helper of triton.language's standard library (those are decorated when
triton is imported: ``tl.zeros`` would run as a GPU function). ``test_import_order`` checks
that in a fresh process that imports triton before setting the variable.

Tolerances. float64: 1e-12 relative to the largest magnitude (the summation order differs
from the library convolution; rounding is ~1e-16 per op over <= 4 chained sweeps of
<= 9 slices of C*k <= 144-term sums). float32 against the float64 reference: 2e-5, i.e.
~300 float32 ulps (6e-8): a k*C-term dot product rounds to ~sqrt(144) * 6e-8 ~ 1e-6 relative
at worst per slice, and errors carry through <= 4 * 9 chained slices plus the backward; the
measured errors are ~2e-7. This holds while no relu input lies within rounding of 0 (a
flipped relu' mask changes a gradient by ~1e-3): the seeds are fixed and no flip occurs.
float16 / bfloat16: the published loop's own error in that dtype (against float64 on the same
rounded inputs) times 2, plus 4 ulps: the kernel must be no less accurate than the loop it
replaces (it rounds once per slice where the loop rounds after the conv and after the add).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from lanenb_trainer.models import row_conv as rc
from lanenb_trainer.models import sweep_triton as st
from lanenb_trainer.models.message_passing import message_pass, plain_message_passing, spatial_message_passing

pytestmark = pytest.mark.skipif(not st.triton_available(), reason="triton is not installed (the dev extra has it)")

DIRECTIONS = [(True, False), (True, True), (False, False), (False, True)]


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _problem(shape: tuple[int, int, int, int], kernel: int, seed: int) -> tuple[torch.Tensor, list[torch.Tensor],
                                                                                torch.Tensor]:
    """Input, the four weights (down, up, right, left) and an output gradient, in float64. The
    weights are larger than SCNN's init so that the relu masks are mixed, not all off."""
    g = torch.Generator().manual_seed(seed)
    c = shape[1]
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    scale = 1.0 / (c * kernel) ** 0.5
    weights = [torch.randn(c, c, 1, kernel, generator=g, dtype=torch.float64) * scale for _ in range(2)]
    weights += [torch.randn(c, c, kernel, 1, generator=g, dtype=torch.float64) * scale for _ in range(2)]
    return x, weights, torch.randn(shape, generator=g, dtype=torch.float64)


def _run(fn, x: torch.Tensor, weights: list[torch.Tensor], grad: torch.Tensor, dtype: torch.dtype,
         **kw) -> list[torch.Tensor]:
    """Output, dL/dx and the four dL/dweights of ``fn`` in ``dtype`` (fresh leaves, no aliasing)."""
    xs = x.to(dtype).clone().requires_grad_()
    ws = [wt.to(dtype).clone().requires_grad_() for wt in weights]
    out = fn(xs, *ws, **kw)
    out.backward(grad.to(dtype))
    return [out.detach(), xs.grad, *(wt.grad for wt in ws)]


def _errors(got: list[torch.Tensor], ref: list[torch.Tensor]) -> list[float]:
    """Max absolute difference relative to the reference's largest magnitude, per tensor."""
    return [float((a.double() - b.double()).abs().max() / b.double().abs().max()) for a, b in zip(got, ref)]


def _rounded(x: torch.Tensor, weights: list[torch.Tensor], dtype: torch.dtype):
    """The float64 problem with inputs rounded to ``dtype`` (what both sides really compute on)."""
    return x.to(dtype).double(), [wt.to(dtype).double() for wt in weights]


@pytest.mark.parametrize(("shape", "kernel"), [((2, 12, 7, 9), 9), ((2, 8, 5, 6), 3)])
def test_float64_equals_plain_loop(shape, kernel) -> None:
    x, weights, grad = _problem(shape, kernel, seed=1)
    ref = _run(plain_message_passing, x, weights, grad, torch.float64)
    got = _run(spatial_message_passing, x, weights, grad, torch.float64, algorithm="triton")
    assert max(_errors(got, ref)) < 1e-12


@pytest.mark.parametrize(("shape", "kernel"), [((2, 16, 9, 11), 3), ((2, 10, 6, 8), 9)])
def test_float32_against_float64(shape, kernel) -> None:
    x, weights, grad = _problem(shape, kernel, seed=2)
    x64, w64 = _rounded(x, weights, torch.float32)
    ref = _run(plain_message_passing, x64, w64, grad, torch.float64)
    got = _run(spatial_message_passing, x, weights, grad, torch.float32, algorithm="triton")
    assert all(t.dtype == torch.float32 for t in got)
    assert max(_errors(got, ref)) < 2e-5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_no_worse_than_plain_loop(dtype) -> None:
    x, weights, grad = _problem((2, 8, 6, 7), 3, seed=3)
    x64, w64 = _rounded(x, weights, dtype)
    ref = _run(plain_message_passing, x64, w64, grad, torch.float64)
    loop = _errors(_run(plain_message_passing, x, weights, grad, dtype), ref)
    got = _run(spatial_message_passing, x, weights, grad, dtype, algorithm="triton")
    assert all(t.dtype == dtype for t in got)
    ulp = torch.finfo(dtype).eps
    for name, err, base in zip(["out", "x", "down", "up", "right", "left"], _errors(got, ref), loop):
        assert err <= 2 * base + 4 * ulp, f"{name}: triton {err:.2e} vs plain loop {base:.2e}"


@pytest.mark.parametrize(("vertical", "reverse"), DIRECTIONS)
def test_each_direction_alone(vertical, reverse) -> None:
    """One sweep per direction through ``message_pass`` (its own relayouts, no chaining)."""
    x, weights, grad = _problem((2, 8, 5, 7), 3, seed=4)
    weight = weights[0] if vertical else weights[2]

    def plain(t: torch.Tensor, wt: torch.Tensor) -> torch.Tensor:
        # the published loop sweeps down, up, right, left: zero weights make the others identities
        zero_v, zero_h = torch.zeros_like(weights[0]), torch.zeros_like(weights[2])
        ws = [zero_v, zero_v, zero_h, zero_h]
        ws[DIRECTIONS.index((vertical, reverse))] = wt
        return plain_message_passing(t, *ws)

    ref = _run(plain, x, [weight], grad, torch.float64)
    got = _run(lambda t, wt: message_pass(t, wt, vertical=vertical, reverse=reverse, algorithm="triton"),
               x, [weight], grad, torch.float64)
    assert max(_errors(got, ref)) < 1e-12


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("in_place", [False, True])
def test_every_element_written(reverse, in_place) -> None:
    """Outputs filled with NaN (mask, dconv: 255 / NaN) before the kernels: none survives."""
    length, n, s, c, k = 5, 2, 19, 18, 3  # S and C past one 16-wide tile: masked tile edges
    g = torch.Generator().manual_seed(5)
    x = torch.randn(length, n, s, c, generator=g)
    taps = torch.randn(k, c, c, generator=g) / (c * k) ** 0.5
    src = x.clone()
    out = src if in_place else torch.full_like(x, float("nan"))
    mask = torch.full(x.shape, 255, dtype=torch.uint8)
    y, m = st.sweep_forward(src, taps, reverse, out=out, mask=mask, block_s=16, block_c=16)
    assert y is out and m is mask
    assert not y.isnan().any() and set(m.unique().tolist()) <= {0, 1}
    first = length - 1 if reverse else 0
    assert torch.equal(y[first], x[first]) and not m[first].any()
    grad = torch.randn(x.shape, generator=g)
    dconv = torch.full_like(x, float("nan"))
    st.sweep_backward(grad, m, taps, reverse, dconv=dconv, block_s=16, block_c=16)
    assert not dconv.isnan().any() and not grad.isnan().any()
    # dconv[i] = mask[i] * dL/dy[i], and dL/dy[i] is final (= the returned dL/dx[i]) by then
    assert torch.equal(dconv, torch.where(m.bool(), grad, torch.zeros_like(grad)))


def test_auto_never_picks_triton() -> None:
    assert "triton" in rc.ALGORITHMS
    for dev_rows in (8, 128, 1000):
        for c in (8, 128):
            assert rc.auto_algorithm(torch.zeros(9, c, c), dev_rows) != "triton"


def test_row_conv_refuses_triton() -> None:
    with pytest.raises(ValueError, match="'triton'"):
        rc.row_conv(torch.zeros(3, 4, 4), 16, "triton")


def test_cpu_without_interpreter_is_refused(monkeypatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET")
    x, weights, _ = _problem((1, 4, 3, 3), 3, seed=6)
    with pytest.raises(ValueError, match=r"'triton'.*TRITON_INTERPRET"):
        spatial_message_passing(x, *weights, algorithm="triton")


def test_missing_triton_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(st, "triton", None)
    assert not st.triton_available()
    x, weights, _ = _problem((1, 4, 3, 3), 3, seed=6)
    with pytest.raises(ValueError, match=r"'triton'.*triton package"):
        message_pass(x, weights[0], vertical=True, reverse=False, algorithm="triton")


def test_other_dtypes_and_layouts_are_refused() -> None:
    with pytest.raises(ValueError, match=r"'triton'.*int64"):
        st.check_usable(torch.zeros(1, 2, 3, 4, dtype=torch.int64))
    x = torch.randn(3, 1, 5, 4)
    with pytest.raises(ValueError, match="contiguous"):
        st.sweep_forward(x.transpose(2, 3).contiguous().transpose(2, 3), torch.randn(3, 4, 4), False)
    with pytest.raises(ValueError, match="taps"):
        st.sweep_forward(x, torch.randn(3, 4, 5), False)


def test_import_order() -> None:
    """triton imported before TRITON_INTERPRET is set (as a test process may): still works."""
    root = Path(__file__).resolve().parents[2]
    code = textwrap.dedent("""
        import os, torch, triton  # noqa
        os.environ["TRITON_INTERPRET"] = "1"
        from lanenb_trainer.models import sweep_triton as st
        y, m = st.sweep_forward(torch.ones(3, 1, 4, 2), torch.full((3, 2, 2), 0.5), False)
        # slice 1: 1 + relu(0.5 * (row sums of 2 channels over the <= 3 taps in range))
        assert y[1, 0, :, 0].tolist() == [3.0, 4.0, 4.0, 3.0], y[1, 0, :, 0].tolist()
        print("ok")
    """)
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "trainer"), str(root), env.get("PYTHONPATH", "")])
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]
