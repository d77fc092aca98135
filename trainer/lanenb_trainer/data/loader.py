"""DataLoader construction for one rank: rank-sharded, resumable mid-epoch, worker-safe.

``ResumableDistributedSampler`` shards like ``torch.utils.data.DistributedSampler`` (same
seeded permutation on every rank, padded or trimmed to a multiple of the world size, rank
``r`` takes every ``world_size``-th index from ``r``), and adds a resume position, skipped on
the next iteration only, so a job resumed from a mid-epoch checkpoint sees exactly the samples
it had not seen yet: ``start_index``, this rank's samples already consumed in the current epoch
(``batches_done * batch_size``), or ``start_position``, the epoch's samples consumed by all ranks
together. The epoch's order is one global permutation of the seed and the epoch, whatever the
world size, and each step of every rank takes a contiguous block of it (``world_size x
batch_size`` positions), so the samples consumed are always a prefix of it: a run resumed on
another number of ranks (``training/resize.py``) splits the rest of that order over its ranks,
and the epoch sees every sample once, none twice.

When the dataset has ``set_epoch`` the sampler yields ``(epoch, index)`` pairs: the epoch
travels with each index into the workers, so augmentation stays a function of
(seed, epoch, index) even with ``persistent_workers`` (whose dataset copies never see a
``set_epoch`` called in the main process).
"""

from __future__ import annotations

import math
import multiprocessing as mp
from collections.abc import Iterator, Sized

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

__all__ = ["ResumableDistributedSampler", "build_loader", "worker_init"]


class ResumableDistributedSampler(Sampler):
    def __init__(self, dataset: Sized, *, num_replicas: int = 1, rank: int = 0,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 start_index: int = 0, yield_epoch: bool = False) -> None:
        if num_replicas < 1:
            raise ValueError(f"world_size must be >= 1; got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be in [0, {num_replicas - 1}]; got {rank}")
        n = len(dataset)
        if n == 0:
            raise ValueError("dataset is empty: nothing to sample")
        self.dataset_len = n
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.seed, self.drop_last = shuffle, int(seed), drop_last
        self.yield_epoch = yield_epoch
        self._dataset_set_epoch = getattr(dataset, "set_epoch", None)
        self.epoch = 0
        if drop_last and n % num_replicas:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = math.ceil(n / num_replicas)
        if self.num_samples == 0:
            raise ValueError(f"dataset of {n} frames is smaller than world_size {num_replicas}")
        self.total_size = self.num_samples * num_replicas
        self.start_position = 0  # samples of the epoch's order consumed by all ranks together
        self.set_start_index(start_index)

    def set_epoch(self, epoch: int) -> None:
        """New shuffle order; also sets the dataset's epoch for direct (non-loader) access."""
        self.epoch = int(epoch)
        if self._dataset_set_epoch is not None:
            self._dataset_set_epoch(self.epoch)

    @property
    def start_index(self) -> int:
        """This rank's samples skipped at the next iteration (rounded down after a resize)."""
        return self.start_position // self.num_replicas

    def set_start_index(self, start_index: int) -> None:
        """Skip this rank's first ``start_index`` samples of the next iteration (a resume at the
        same world size: ``batches_done * batch_size``)."""
        if not 0 <= start_index <= self.num_samples:
            raise ValueError(f"start_index must be in [0, {self.num_samples}] (samples per rank "
                             f"per epoch); got {start_index}")
        self.start_position = int(start_index) * self.num_replicas

    def set_start_position(self, position: int) -> None:
        """Skip the epoch order's first ``position`` samples at the next iteration, whichever
        world size consumed them (a resume on another number of ranks); the rest is split over
        this sampler's ranks, each taking the same number of samples.

        Raises:
            ValueError: ``position`` is outside the epoch's ``[0, total_size]``.
        """
        if not 0 <= position <= self.total_size:
            raise ValueError(f"start_position must be in [0, {self.total_size}] (samples per epoch); "
                             f"got {position}")
        self.start_position = int(position)

    def _indices(self) -> list[int]:
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            idx = torch.randperm(self.dataset_len, generator=g).tolist()
        else:
            idx = list(range(self.dataset_len))
        if self.total_size > len(idx):
            pad = self.total_size - len(idx)
            idx += (idx * math.ceil(pad / len(idx)))[:pad]
        idx = idx[: self.total_size]
        # the rest of the order after the resume position, a whole number of samples per rank
        skip, self.start_position = self.start_position, 0  # the resume position applies once
        rest = (self.total_size - skip) // self.num_replicas * self.num_replicas
        return idx[skip + self.rank: skip + rest: self.num_replicas]

    def __iter__(self) -> Iterator:
        mine = self._indices()
        if self.yield_epoch:
            return iter([(self.epoch, i) for i in mine])
        return iter(mine)

    def __len__(self) -> int:
        return (self.total_size - self.start_position) // self.num_replicas


def worker_init(_worker_id: int) -> None:
    """One OpenCV/torch thread per worker: workers are the parallelism; threads would fight."""
    import cv2

    cv2.setNumThreads(1)
    torch.set_num_threads(1)


def build_loader(dataset: Dataset, batch_size: int, *, rank: int = 0, world_size: int = 1,
                 num_workers: int = 0, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = True, start_index: int = 0,
                 pin_memory: bool | None = None) -> DataLoader:
    """DataLoader for this rank; call ``loader.sampler.set_epoch(epoch)`` before each epoch.

    ``drop_last`` drops the last incomplete batch (and trims the shard so every rank has the
    same number of samples); evaluation passes ``shuffle=False, drop_last=False``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0; got {num_workers}")
    if not isinstance(dataset, Sized):  # the sampler shards by length (it raised this TypeError itself)
        raise TypeError(f"object of type {type(dataset).__name__!r} has no len()")
    sampler = ResumableDistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=shuffle, seed=seed,
        drop_last=drop_last, start_index=start_index,
        yield_epoch=callable(getattr(dataset, "set_epoch", None)),
    )
    if pin_memory is None:
        pin_memory = torch.cuda.is_available()
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers,
                      pin_memory=pin_memory, drop_last=drop_last, **worker_policy(num_workers, seed))


def worker_policy(num_workers: int, seed: int = 0) -> dict:
    """The one loader policy of every loader (training and evaluation alike).

    Every loader gets its own seeded ``generator``: a DataLoader otherwise draws its workers'
    base seed from the global torch RNG each time it starts an iterator, and that RNG also
    drives dropout, so a resumed run (whose loaders start at other moments than the original
    run's) would see other dropout masks from then on. With its own generator, starting a
    loader never touches the global RNG and the checkpoint's RNG state stays exact.
    """
    generator = torch.Generator()
    generator.manual_seed(int(seed))
    if num_workers <= 0:
        return {"generator": generator}
    # forkserver, not fork: a worker forked from a rank whose OpenCV/OpenMP thread pools
    # (or MPI) are already running can deadlock; the fork server is a clean process.
    ctx = "forkserver" if "forkserver" in mp.get_all_start_methods() else None
    return {"persistent_workers": True, "prefetch_factor": 2, "worker_init_fn": worker_init,
            "multiprocessing_context": ctx, "generator": generator}


def build_eval_loader(dataset: Dataset, batch_size: int, *, rank: int = 0, world_size: int = 1,
                      num_workers: int = 0, pin_memory: bool | None = None) -> DataLoader | None:
    """This rank's evaluation shard (frames ``rank, rank + world_size, ...``: each frame once,
    no padding), in order, with the same worker policy as training; ``None`` for an empty
    shard (fewer frames than ranks). Build it once and iterate it every evaluation."""
    from torch.utils.data import Subset

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    indices = list(range(rank, len(dataset), world_size))  # type: ignore[arg-type]
    if not indices:
        return None
    if pin_memory is None:
        pin_memory = torch.cuda.is_available()
    return DataLoader(Subset(dataset, indices), batch_size=batch_size, shuffle=False, num_workers=num_workers,
                      pin_memory=pin_memory, drop_last=False, **worker_policy(num_workers))
