"""torch.distributed engine: DistributedDataParallel over gloo (CPU) or NCCL (GPU).

Ranks come from whichever launcher started us: Open MPI's ``OMPI_COMM_WORLD_*``, MPICH /
Intel MPI's ``PMI_*``, or torchrun's ``RANK``/``WORLD_SIZE``. The rendezvous address is
``MASTER_ADDR``/``MASTER_PORT``, which the launcher must export to every rank (``-x``).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist

from lanenb_trainer.engines.base import Engine, EngineError

# (rank, size, local rank, local size) variable names per launcher, most specific first
_LAUNCHER_VARS = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
)


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise EngineError(f"environment variable {name}={env[name]!r} is not an integer") from None


def ranks_from_env(env: Mapping[str, str] | None = None) -> tuple[int, int, int, int]:
    """(rank, world_size, local_rank, local_size) from the launcher's variables; (0, 1, 0, 1) alone."""
    env = os.environ if env is None else env
    for rank_var, size_var, local_var, local_size_var in _LAUNCHER_VARS:
        if rank_var in env and size_var in env:
            rank, size = _int(env, rank_var), _int(env, size_var)
            local_rank = _int(env, local_var) if local_var in env else rank
            local_size = _int(env, local_size_var) if local_size_var in env else size
            if not 0 <= rank < size:
                raise EngineError(f"{rank_var}={rank} is outside 0..{size - 1} ({size_var}={size})")
            return rank, size, local_rank, local_size
    return 0, 1, 0, 1


def _timed_allreduce(engine: DDPEngine, bucket):
    """DDP's own all-reduce of one bucket (a ``dist.GradBucket``; returns DDP's future of the
    reduced tensor), noting its launch on the engine's active timer. No annotations on
    ``bucket`` and the result: ``register_comm_hook`` compares them with the classes, and
    ``from __future__ import annotations`` makes them strings it refuses.

    The arithmetic is DDP's built-in one, so timing leaves the weights bit for bit as they are
    with ``--timing-every 0``: scale by ``1 / world size`` (a multiply, as DDP's reducer does,
    not torch's reference ``allreduce_hook``'s divide), then sum across ranks.

    How the exchange wait is measured: DDP launches a bucket's all-reduce as soon as its
    gradients are ready, during backward, and backward returns only when every all-reduce has
    finished (the reducer waits for the buckets' futures at the end of the pass; on a GPU the
    stream waits for NCCL's). The last launch comes when the last gradient is ready, i.e. when
    this rank's backward compute is done, so backward's time after the last launch is what this
    rank waits for the exchange: for slower ranks and for the link. A mark at the launch rather
    than a callback on the future, because a CUDA future's callback runs when the work is
    queued, not when it ran; a mark on the stream (``training.timing.CudaClock``) is timed
    where it runs.
    """
    timer = engine.active_timer
    if timer is not None:
        timer.exchange_launched()
    buffer = bucket.buffer()
    buffer.mul_(1.0 / engine.world_size)
    work = dist.all_reduce(buffer, async_op=True)
    assert work is not None  # async_op=True always returns the work handle
    return work.get_future().then(lambda fut: fut.value()[0])


def ddp_backend(device_type: str, ranks_per_gpu: int) -> str:
    """NCCL when each rank of a host has a GPU of its own; gloo on CPUs and when ranks share a
    GPU, which NCCL refuses ("Duplicate GPU detected"): gloo all-reduces CUDA tensors through
    host memory, slower, but the shared GPU is the bottleneck then anyway."""
    if device_type == "cuda" and ranks_per_gpu <= 1:
        return "nccl"
    return "gloo"


class DDPEngine(Engine):
    name = "ddp"
    _host_group: Any = None  # the process group of host-memory collectives (None: the default one)

    def init(self) -> DDPEngine:
        self.rank, self.world_size, self.local_rank, self.local_size = ranks_from_env()
        self._pick_device()
        if self.world_size > 1 and not dist.is_initialized():
            missing = [v for v in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(v)]
            if missing:
                raise EngineError(
                    f"--engine ddp with {self.world_size} ranks needs {' and '.join(missing)} in every "
                    "rank's environment (mpirun -x MASTER_ADDR -x MASTER_PORT; lanenb train sets them)"
                )
            backend = ddp_backend(self.device.type, self.ranks_per_gpu)
            dist.init_process_group(
                backend=backend, init_method="env://", rank=self.rank, world_size=self.world_size,
                timeout=datetime.timedelta(seconds=self.collective_timeout),
            )
            if backend != "gloo":  # NCCL reduces only CUDA tensors: host flags need a gloo group
                self._host_group = dist.new_group(backend="gloo")
        return self

    @property
    def distributed(self) -> bool:
        return self.world_size > 1 and dist.is_initialized()

    def prepare(self, model, optimizer, *, timed=False):
        model.to(self.device)
        if not self.distributed:
            return model, optimizer  # one rank: no exchange, backward_step laps it as 0
        # DDP broadcasts rank 0's parameters and buffers at construction.
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if timed:
            ddp.register_comm_hook(state=self, hook=_timed_allreduce)
        # Optimizer state (momentum after --resume) must match too: sent as tensors (wire.py)
        optimizer.load_state_dict(self.broadcast_object(optimizer.state_dict() if self.rank == 0 else None))
        return ddp, optimizer

    def allreduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.detach().clone()
        if self.distributed:
            dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    def count_flags(self, flag: bool) -> int:
        return self.count_flags_async(flag)()

    def count_flags_async(self, flag: bool) -> Callable[[], int]:
        out = torch.tensor([int(flag)], dtype=torch.int32)
        if not self.distributed:
            return lambda: int(out.item())
        work = dist.all_reduce(out, op=dist.ReduceOp.SUM, group=self._host_group, async_op=True)
        assert work is not None  # async_op=True always returns the work handle

        def wait() -> int:
            work.wait()
            return int(out.item())
        return wait

    def allgather_bytes(self, data: torch.Tensor) -> list[torch.Tensor]:
        if not self.distributed:
            return [data]
        # gloo (the host group under NCCL): the lengths first, then every part padded to the longest
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.world_size)]
        dist.all_gather(sizes, torch.tensor([data.numel()], dtype=torch.int64), group=self._host_group)
        longest = max(int(s) for s in sizes)
        padded = torch.zeros(longest, dtype=torch.uint8)
        padded[:data.numel()] = data
        parts = [torch.empty(longest, dtype=torch.uint8) for _ in range(self.world_size)]
        dist.all_gather(parts, padded, group=self._host_group)
        return [part[:int(size)] for part, size in zip(parts, sizes)]

    def no_sync(self, model):
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            return model.no_sync()
        return super().no_sync(model)

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def shutdown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
