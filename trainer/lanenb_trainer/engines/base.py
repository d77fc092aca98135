"""The engine interface the training loop talks to, independent of Horovod or torch.distributed."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol

import torch

from lanenb_trainer.engines.wire import decode, encode


class EngineError(RuntimeError):
    """The distributed environment is missing or inconsistent."""


class PhaseTimer(Protocol):
    """What :meth:`Engine.backward_step` reports its phases to (``training.timing.StepTimer``).

    Only the engine knows where the gradient exchange happens (inside backward for DDP, in
    ``synchronize`` for Horovod), so it laps ``compute``, ``exchange`` and ``optimizer`` itself.
    """

    def lap(self, phase: str) -> None:
        """The time since the previous lap belongs to ``phase``."""

    def lap_split(self, first: str, second: str) -> None:
        """Like ``lap``, split at the step's last all-reduce launch: ``first`` before, ``second`` after."""

    def exchange_launched(self) -> None:
        """A gradient all-reduce was launched just now."""


class Engine(ABC):
    """One rank's view of the distributed world.

    Life cycle: ``init()`` → ``prepare(model, optimizer)`` → per step ``backward_step(...)`` →
    ``shutdown()``. Collectives used outside the step (metric reduction, gathering
    predictions) go through :meth:`allreduce_sum` and :meth:`gather_objects` so the loop
    never touches the backend directly.
    """

    name = "base"

    def __init__(self, *, collective_timeout: float = 600.0, device: str = "auto") -> None:
        self.collective_timeout = collective_timeout
        self.device_choice = device  # --device: auto | cpu | cuda
        self.rank = 0
        self.world_size = 1
        self.local_rank = 0
        self.local_size = 1
        self.device = torch.device("cpu")
        self.active_timer: PhaseTimer | None = None  # set during backward_step's backward pass

    # -- set-up ---------------------------------------------------------------------------
    @abstractmethod
    def init(self) -> Engine:
        """Join the world; sets rank, world_size, local_rank, local_size and device."""

    def _pick_device(self) -> None:
        """``--device``: a GPU per rank chosen by local rank (round-robin when ranks outnumber
        GPUs), or the CPU with a fair share of this host's cores.

        Raises:
            EngineError: ``--device cuda`` and torch sees no GPU (named: a CPU build of torch,
                or ``CUDA_VISIBLE_DEVICES`` hiding them).
        """
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = pick_gpu(self.device_choice, self.local_rank, count,
                         torch_cuda=torch.version.cuda, visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
        if index is None:
            self.device = torch.device("cpu")
        else:
            torch.cuda.set_device(index)
            self.device = torch.device("cuda", index)
        torch.set_num_threads(threads_per_rank(self.local_size))

    @property
    def ranks_per_gpu(self) -> int:
        """This host's ranks per GPU (1 on CPUs): above 1, ranks share a GPU."""
        if self.device.type != "cuda":
            return 1
        return -(-self.local_size // max(1, torch.cuda.device_count()))

    @abstractmethod
    def prepare(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, timed: bool = False
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        """Wrap model/optimizer for gradient exchange and make every rank start from rank 0's state.

        ``timed``: :meth:`backward_step` will get a :class:`PhaseTimer`; install whatever tells
        the exchange wait apart from compute (DDP's communication hook). Off, nothing is added.
        """

    # -- per step -------------------------------------------------------------------------
    def backward_step(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer,
                      scaler: torch.amp.GradScaler | None = None, timer: PhaseTimer | None = None) -> None:
        """Backward, gradient exchange and optimizer step (AMP-aware), lapping ``compute``,
        ``exchange`` and ``optimizer`` on ``timer``.

        Here the exchange (if any) happens inside backward: ``timer.exchange_launched`` calls
        made during it (DDP's hook, see ``ddp.py``) split backward into compute and the wait.
        """
        optimizer.zero_grad(set_to_none=True)
        self.active_timer = timer
        try:
            if scaler is not None:
                scaler.scale(loss).backward()
            else:
                loss.backward()
        finally:
            self.active_timer = None
        if timer is not None:
            timer.lap_split("compute", "exchange")
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        if timer is not None:
            timer.lap("optimizer")

    # -- collectives ----------------------------------------------------------------------
    @abstractmethod
    def allreduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum across ranks (returns a new tensor on the same device)."""

    @abstractmethod
    def allgather_bytes(self, data: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's 1-D uint8 CPU tensor (lengths may differ), in rank order, on every rank."""

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's value (tensors and plain containers), in rank order, on every rank.

        Sent as bytes and read with the weights-only loader (``wire``): a peer on the
        rendezvous can send data, never code to run."""
        if self.world_size == 1:
            return [obj]
        parts = self.allgather_bytes(encode(obj))
        return [decode(part, rank=rank) for rank, part in enumerate(parts)]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Rank ``src``'s value on every rank (the others pass anything, e.g. None); read as
        :meth:`gather_objects` reads, and only the sender's part is decoded."""
        if self.world_size == 1:
            return obj
        parts = self.allgather_bytes(encode(obj if self.rank == src else None))
        return decode(parts[src], rank=src)

    def count_flags(self, flag: bool) -> int:
        """How many ranks pass ``flag=True``; every rank must call it at the same point.

        A one-number collective on host memory, so asking every step (is any rank being
        preempted?) never waits for the GPU's queued work. Horovod and gloo reduce CPU tensors
        as they are; DDP over NCCL uses a gloo group of its own (``ddp.py``).
        """
        if self.world_size == 1:
            return int(flag)
        return int(self.allreduce_sum(torch.tensor([int(flag)], dtype=torch.int32)).item())

    def count_flags_async(self, flag: bool) -> Callable[[], int]:
        """:meth:`count_flags`, started now; call the result for the count (it waits). Started
        when a step begins and read when it ends, the collective runs behind the step's compute
        (gloo: ~30 us left to wait instead of ~450 us, 2 CPU ranks). Here: done at once."""
        count = self.count_flags(flag)
        return lambda: count

    def allreduce_gradients(self, params: list[torch.Tensor]) -> None:
        """Average the ``.grad`` of ``params`` in place, as one flat buffer (one collective).

        Used by bench/scaling.py to time the gradient exchange the engines do in training.
        """
        if self.world_size == 1:
            return
        grads = [p.grad for p in params if p.grad is not None]
        flat = self.allreduce_sum(torch.cat([g.reshape(-1) for g in grads])) / self.world_size
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(flat[offset:offset + n].view_as(g))
            offset += n

    def barrier(self) -> None:
        self.allreduce_sum(torch.zeros(1, device=self.device))

    def no_sync(self, model: torch.nn.Module):
        """Context in which backward does not exchange gradients (bench timing only)."""
        import contextlib

        return contextlib.nullcontext()

    @abstractmethod
    def shutdown(self) -> None:
        """Leave the process group (every engine has one to leave) so the rank exits cleanly."""

    @property
    def is_primary(self) -> bool:
        return self.rank == 0

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "rank": self.rank, "world_size": self.world_size,
                "local_rank": self.local_rank, "local_size": self.local_size,
                "device": str(self.device), "threads": torch.get_num_threads()}


def pick_gpu(choice: str, local_rank: int, gpus: int, *, torch_cuda: str | None = None,
             visible: str | None = None) -> int | None:
    """The GPU index for ``--device choice`` on a rank with ``gpus`` visible GPUs (None: the CPU).

    Raises:
        EngineError: ``cuda`` asked for and no GPU visible, saying why as far as torch tells.
    """
    if choice == "cpu" or (choice == "auto" and gpus == 0):
        return None
    if choice not in ("auto", "cuda"):
        raise EngineError(f"--device {choice!r} is not one of auto, cpu, cuda")
    if gpus == 0:
        why = ("this torch is a CPU build (torch.version.cuda is None); install a CUDA build"
               if torch_cuda is None else
               f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU" if visible is not None and not visible.strip()
               else f"torch (CUDA {torch_cuda}) finds no GPU: check nvidia-smi and the driver")
        raise EngineError(f"--device cuda (gpus >= 1): no GPU visible to this rank: {why}")
    return local_rank % gpus


def threads_per_rank(local_size: int) -> int:
    """Cores divided among the ranks on this host, at least one (respects CPU affinity)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    override = os.environ.get("LANENB_THREADS")
    if override:
        return max(1, int(override))
    return max(1, cores // max(1, local_size))
