"""Reusable buffers for the message passing's temporaries (its ``relu' * G`` buffers, the
Winograd forms' per-slice points and transformed filters, the weight gradient's transformed
windows and tiles).

Why: on the CPU every fresh multi-megabyte tensor is new memory from the system, and touching
it page-faults once per 4 KiB page. At the quickstart's shape a training step's message passing
allocated tens of MB of such temporaries; reusing them made its forward + backward ~5% faster
(issue 35, AVX2, 2 threads, interleaved A/B; raising glibc's mmap threshold for the whole
process does somewhat more, but a library must not change that behind its user's back).
PyTorch's CUDA allocator already caches, so on other devices :meth:`Scratch.get` simply
allocates.

A :class:`Scratch` belongs to one :class:`~lanenb_trainer.models.message_passing.MessagePassing`
module (not to the process), holds a buffer per name and shape (the few shapes used last: a
step's vertical and horizontal sweeps need one each) and is not thread-safe: one forward or
backward of its module at a time, as training runs them.
"""

from __future__ import annotations

import torch

__all__ = ["Scratch", "scratch_or_new"]


class Scratch:
    """Named CPU buffers, reused for the same name, shape and dtype."""

    KEEP = 4  # shapes kept per name: the sweeps' two axes, with room for a second input size

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, tuple[int, ...], torch.dtype], torch.Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """An uninitialised ``shape`` tensor with ``like``'s dtype and device: on the CPU the
        buffer this name had in this shape before, else a new one, kept for next time (the
        name's least recently used shape is dropped beyond :attr:`KEEP`). Its contents are
        whatever the last user left: callers write before they read, and a name is one
        temporary, never two alive at once."""
        if like.device.type != "cpu":
            return like.new_empty(shape)
        key = (name, tuple(shape), like.dtype)
        buf = self._buffers.pop(key, None)
        if buf is None:
            buf = like.new_empty(shape)
            same_name = [k for k in self._buffers if k[0] == name]
            for old in same_name[:max(len(same_name) + 1 - self.KEEP, 0)]:
                del self._buffers[old]
        self._buffers[key] = buf  # most recently used last
        return buf

    def __getstate__(self) -> dict:
        return {}  # a copied or pickled module starts with no buffers (they are not state)

    def __setstate__(self, state: dict) -> None:
        self._buffers = {}

    def clear(self) -> None:
        """Drop every buffer (the memory goes back to the allocator)."""
        self._buffers.clear()


def scratch_or_new(scratch: Scratch | None, name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """``scratch.get(...)``, or a new tensor where there is no scratch (the functional API)."""
    return like.new_empty(shape) if scratch is None else scratch.get(name, shape, like)
