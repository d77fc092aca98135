"""Gradient accumulation over ``k`` micro-batches per optimizer step (a resized run keeping its
global batch: ``resize.py``), on any engine.

The first ``k - 1`` micro-batches' gradients are taken with ``torch.autograd.grad`` (no
``.grad`` written, so neither DDP's nor Horovod's exchange hooks fire) and summed here; the
last micro-batch goes through the engine's own ``backward_step`` with the sum folded into its
loss as ``sum(p * g_acc)``, whose gradient is ``g_acc``: the engine exchanges the whole step's
gradient once, with its usual timing and AMP scaler, and needs no accumulation mode of its own.
With ``k == 1`` nothing changes: the loss is the micro-batch's, bit for bit.
"""

from __future__ import annotations

import torch

__all__ = ["Accumulator"]


class Accumulator:
    """Sums ``k - 1`` micro-batches' gradients of ``params`` (each loss divided by ``k``) for the
    optimizer step the ``k``-th one makes."""

    def __init__(self, k: int, params: list[torch.nn.Parameter], scaler: torch.amp.GradScaler | None = None) -> None:
        if k < 1:
            raise ValueError(f"accumulation must be >= 1 micro-batch per step; got {k}")
        self.k = k
        self.params = params
        self.scaler = scaler
        self.grads: list[torch.Tensor | None] = [None] * len(params)
        self.losses: torch.Tensor | None = None  # (loss, seg, exist) summed over the micro-batches so far
        self.count = 0

    @property
    def stepping(self) -> bool:
        """Whether the next micro-batch is the step's last (the one the engine steps on)."""
        return self.count == self.k - 1

    def add(self, loss: torch.Tensor, parts: torch.Tensor) -> None:
        """One of the first ``k - 1`` micro-batches: its gradient of ``loss / k``, unscaled."""
        scaled = loss / self.k
        scale = 1.0
        if self.scaler is not None:  # backward in the scaler's range (float16), kept unscaled
            scale = float(self.scaler.get_scale())
            scaled = self.scaler.scale(scaled)
        grads = torch.autograd.grad(scaled, self.params, allow_unused=True)
        for i, g in enumerate(grads):
            if g is None:
                continue
            g = g / scale if scale != 1.0 else g
            held = self.grads[i]
            self.grads[i] = g if held is None else held.add_(g)
        self.losses = parts if self.losses is None else self.losses + parts
        self.count += 1

    def step_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss the engine steps on: the last micro-batch's ``/ k`` plus the held gradients."""
        if self.k == 1:
            return loss
        total = loss / self.k
        for p, g in zip(self.params, self.grads):
            if g is not None:
                total = total + (p * g).sum()
        return total

    def step_parts(self, parts: torch.Tensor) -> torch.Tensor:
        """The step's (loss, seg, exist): the micro-batches' mean; then starts the next step."""
        if self.k == 1:
            return parts
        out = (parts if self.losses is None else self.losses + parts) / self.k
        self.grads = [None] * len(self.params)
        self.losses, self.count = None, 0
        return out
