"""torch.distributed engine: DistributedDataParallel over gloo (CPU) or NCCL (GPU).

Ranks come from whichever launcher started us: Open MPI's ``OMPI_COMM_WORLD_*``, MPICH /
Intel MPI's ``PMI_*``, or torchrun's ``RANK``/``WORLD_SIZE``. The rendezvous address is
``MASTER_ADDR``/``MASTER_PORT``, which the launcher must export to every rank (``-x``).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
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


class DDPEngine(Engine):
    name = "ddp"

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
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            dist.init_process_group(
                backend=backend, init_method="env://", rank=self.rank, world_size=self.world_size,
                timeout=datetime.timedelta(seconds=self.collective_timeout),
            )
        return self

    @property
    def distributed(self) -> bool:
        return self.world_size > 1 and dist.is_initialized()

    def prepare(self, model, optimizer):
        model.to(self.device)
        if not self.distributed:
            return model, optimizer
        # DDP broadcasts rank 0's parameters and buffers at construction.
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        # Optimizer state (momentum after --resume) must match too.
        state = [optimizer.state_dict() if self.rank == 0 else None]
        dist.broadcast_object_list(state, src=0)
        optimizer.load_state_dict(state[0])
        return ddp, optimizer

    def allreduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.detach().clone()
        if self.distributed:
            dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    def gather_objects(self, obj: Any) -> list[Any]:
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

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
