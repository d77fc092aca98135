"""Horovod engine, as in the RUN:AI guide: ``hvd.init``, ``DistributedOptimizer``, broadcasts.

Ranks come from Horovod itself (it reads the MPI or Gloo environment), so the same code
runs under ``mpirun`` locally and under the MPI Operator's launcher in a cluster.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from lanenb_trainer.engines.base import Engine, PhaseTimer


class HorovodEngine(Engine):
    name = "horovod"

    def init(self) -> HorovodEngine:
        import horovod.torch as hvd

        self.hvd = hvd
        hvd.init()
        self.rank, self.world_size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()
        self._pick_device()
        return self

    def prepare(self, model, optimizer, *, timed=False):
        # timed: nothing to install; backward_step times Horovod's synchronize() directly
        hvd = self.hvd
        model.to(self.device)
        # DistributedOptimizer builds a new optimizer from the param groups and drops the
        # state (momentum restored by --resume), so carry the state over explicitly.
        state = optimizer.state_dict()
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             op=hvd.Average)
        optimizer.load_state_dict(state)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        # not hvd.broadcast_optimizer_state: it pickles the scalars; this sends tensors (wire.py)
        optimizer.load_state_dict(self.broadcast_object(optimizer.state_dict() if self.rank == 0 else None))
        return model, optimizer

    def backward_step(self, loss, optimizer, scaler=None, timer: PhaseTimer | None = None) -> None:
        """Backward launches each gradient's all-reduce as it is ready; ``synchronize()`` is the
        wait for them (``exchange``), then the step runs without synchronizing again. This is
        what ``optimizer.step()`` does inside, written out so the wait can be timed, and what
        AMP needs anyway: the scaler must see the reduced gradients before it unscales them."""
        optimizer.zero_grad()  # Horovod's wrapper takes no set_to_none
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
        if timer is not None:
            timer.lap("compute")
        optimizer.synchronize()
        if timer is not None:
            timer.lap("exchange")
        with optimizer.skip_synchronize():
            if scaler is None:
                optimizer.step()
            else:
                scaler.step(optimizer)
        if scaler is not None:
            scaler.update()
        if timer is not None:
            timer.lap("optimizer")

    def allreduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return tensor.detach().clone()
        return self.hvd.allreduce(tensor.detach(), op=self.hvd.Sum)

    def count_flags_async(self, flag: bool) -> Callable[[], int]:
        if self.world_size == 1:
            return lambda: int(flag)
        # one fixed name: Horovod's response cache then skips the negotiation of a new tensor
        handle = self.hvd.allreduce_async(torch.tensor([int(flag)], dtype=torch.int32), op=self.hvd.Sum,
                                          name="lanenb.count_flags")
        return lambda: int(self.hvd.synchronize(handle).item())

    def allgather_bytes(self, data: torch.Tensor) -> list[torch.Tensor]:
        if self.world_size == 1:
            return [data]
        # Horovod gathers along dim 0 whatever each rank's length: the lengths say where to cut
        sizes = self.hvd.allgather(torch.tensor([data.numel()], dtype=torch.int64)).tolist()
        joined = self.hvd.allgather(data)
        return list(torch.split(joined, sizes))

    def barrier(self) -> None:
        if self.world_size > 1:
            self.hvd.barrier()

    def shutdown(self) -> None:
        self.hvd.shutdown()
