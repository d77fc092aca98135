"""What ranks send each other outside the gradient exchange, as bytes in a uint8 tensor.

Why not ``all_gather_object`` / ``broadcast_object``: both unpickle whatever a peer sent, and
the rendezvous they run over (MASTER_ADDR:MASTER_PORT, Horovod's controller) takes any
process that connects. A pickle can run any code when it is loaded. Here a value is written
with ``torch.save`` and read back with torch's weights-only loader, which builds tensors and
plain containers (dict, list, tuple, str, numbers, bool, None) and refuses everything else,
so a peer can send data but never code.
"""

from __future__ import annotations

import io
import re
from typing import Any

import torch


class UnsafePayloadError(RuntimeError):
    """A peer sent bytes that are not plain data (tensors and containers)."""


def encode(obj: Any) -> torch.Tensor:
    """``obj`` as a 1-D uint8 CPU tensor (GPU tensors in it come back on the CPU)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def decode(data: torch.Tensor, *, rank: int | None = None) -> Any:
    """What :func:`encode` wrote, read with the weights-only loader.

    Raises:
        UnsafePayloadError: the bytes hold anything but tensors and plain containers, or are
            not a torch save at all; ``rank`` names the sender.
    """
    raw = data.detach().cpu().contiguous().numpy().tobytes()
    try:
        return torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as exc:  # junk bytes fail in many ways (KeyError, struct.error...): all refused
        sender = f"rank {rank}" if rank is not None else "a peer"
        named = re.search(r"GLOBAL (\S+)", str(exc))
        what = f"it names {named.group(1)}" if named else f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        raise UnsafePayloadError(
            f"{sender} sent {len(raw)} bytes that are not plain data (tensors, dicts, lists, numbers, "
            f"strings); refused without running them ({what})") from None
