"""The message passing's reused temporaries: a module's second step reuses its first step's
buffers (no fresh memory to page-fault) and still computes what the functional API computes."""

from __future__ import annotations

import copy
import pickle

import torch

from lanenb_trainer.models.message_passing import MessagePassing, spatial_message_passing
from lanenb_trainer.models.scratch import Scratch


def _step(mp: MessagePassing, x: torch.Tensor, g: torch.Tensor) -> list[torch.Tensor]:
    mp.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_()
    out = mp(x)
    out.backward(g)
    return [out.detach(), x.grad] + [p.grad.clone() for p in (mp.down.weight, mp.up.weight,
                                                               mp.right.weight, mp.left.weight)]


def test_module_reuses_its_buffers_and_matches_the_functional_api() -> None:
    torch.manual_seed(0)
    mp = MessagePassing(6, 9).double()
    x, g = torch.randn(2, 6, 7, 30, dtype=torch.float64), torch.randn(2, 6, 7, 30, dtype=torch.float64)
    first = _step(mp, x, g)
    names = {name for name, _, _ in mp.scratch._buffers}
    assert "relu' * G" in names  # the backward's temporary (the forward keeps the conv's own outputs)
    pointers = {name: buf.data_ptr() for name, buf in mp.scratch._buffers.items()}
    second = _step(mp, x, g)
    assert {name: buf.data_ptr() for name, buf in mp.scratch._buffers.items()} == pointers
    for a, b in zip(first, second):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    xf = x.clone().requires_grad_()
    ws = [w.detach().clone().requires_grad_() for w in (mp.down.weight, mp.up.weight, mp.right.weight, mp.left.weight)]
    out = spatial_message_passing(xf, *ws)  # no scratch: fresh buffers
    out.backward(g)
    for a, b in zip(first, [out.detach(), xf.grad] + [w.grad for w in ws]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_a_name_keeps_a_few_shapes_the_least_recently_used_goes() -> None:
    scratch = Scratch()
    like = torch.zeros(1)
    a = scratch.get("t", (4, 5), like)
    b = scratch.get("t", (3, 5), like)  # the other axis: both kept
    assert b is not a and tuple(b.shape) == (3, 5)
    assert scratch.get("t", (4, 5), like) is a and scratch.get("t", (3, 5), like) is b
    assert scratch.get("t", (3, 5), like.double()).dtype == torch.float64
    for rows in range(6, 6 + Scratch.KEEP):
        scratch.get("t", (rows, 5), like)
    assert sum(1 for name, _, _ in scratch._buffers if name == "t") == Scratch.KEEP
    assert scratch.get("t", (3, 5), like) is not b  # dropped, made again


def test_copies_and_pickles_carry_no_buffers() -> None:
    mp = MessagePassing(4, 3)
    mp(torch.randn(1, 4, 5, 6)).sum().backward()  # the backward's buffers
    assert mp.scratch._buffers
    assert not copy.deepcopy(mp).scratch._buffers
    assert not pickle.loads(pickle.dumps(mp)).scratch._buffers
    assert "scratch" not in "".join(mp.state_dict())  # not state: checkpoints are unchanged
