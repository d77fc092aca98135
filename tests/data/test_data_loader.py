"""Rank sharding, mid-epoch resume and worker-count independence of the training loader."""

from __future__ import annotations

import pytest
import torch

from lanenb_trainer.data.loader import ResumableDistributedSampler, build_loader
from lanenb_trainer.data.tusimple import TuSimpleDataset


def shards(n, world, **kw):
    return [list(ResumableDistributedSampler(range(n), num_replicas=world, rank=r, **kw))
            for r in range(world)]


def test_ranks_partition_the_epoch():
    parts = shards(10, 3, seed=1)
    assert all(len(p) == 4 for p in parts)  # padded to 12 like DistributedSampler
    flat = [i for p in parts for i in p]
    assert set(flat) == set(range(10))
    dropped = shards(10, 3, seed=1, drop_last=True)
    assert all(len(p) == 3 for p in dropped) and len({i for p in dropped for i in p}) == 9


def test_same_order_as_torch_distributed_sampler():
    from torch.utils.data import DistributedSampler

    for rank in range(2):
        ref = DistributedSampler(range(11), num_replicas=2, rank=rank, shuffle=True, seed=5)
        ref.set_epoch(3)
        ours = ResumableDistributedSampler(range(11), num_replicas=2, rank=rank, seed=5)
        ours.set_epoch(3)
        assert list(ours) == list(ref)


def test_epochs_reshuffle_and_start_index_resumes_once():
    s = ResumableDistributedSampler(range(20), num_replicas=2, rank=1, seed=0)
    s.set_epoch(1)
    full = list(s)
    s.set_epoch(2)
    assert list(s) != full
    s.set_epoch(1)
    s.set_start_index(4)
    assert len(s) == 6 and list(s) == full[4:]
    assert list(s) == full and len(s) == 10  # the skip applies to one pass only


@pytest.mark.parametrize("kwargs, message", [
    ({"num_replicas": 0}, "world_size must be >= 1; got 0"),
    ({"num_replicas": 2, "rank": 2}, "rank must be in [0, 1]; got 2"),
    ({"start_index": 11}, "start_index must be in [0, 10] (samples per rank per epoch); got 11"),
])
def test_bad_sampler_arguments(kwargs, message):
    with pytest.raises(ValueError) as info:
        ResumableDistributedSampler(range(10), **kwargs)
    assert str(info.value) == message


def test_bad_loader_arguments(real_root):
    ds = TuSimpleDataset(real_root, val_fraction=0.0)
    with pytest.raises(ValueError, match="batch_size must be >= 1; got 0"):
        build_loader(ds, 0)
    with pytest.raises(ValueError, match="num_workers must be >= 0; got -1"):
        build_loader(ds, 2, num_workers=-1)


def _batches(loader, epoch):
    loader.sampler.set_epoch(epoch)
    return [(b["index"].tolist(), b["image"].clone(), b["mask"].clone()) for b in loader]


def test_batches_do_not_depend_on_worker_count(real_root):
    ds = TuSimpleDataset(real_root, augment=True, seed=4, size=(72, 200), val_fraction=0.0)
    l0 = build_loader(ds, 2, rank=1, world_size=2, num_workers=0, seed=3)
    l2 = build_loader(ds, 2, rank=1, world_size=2, num_workers=2, seed=3)
    assert l2.persistent_workers
    for epoch in (0, 1):  # persistent workers must follow the epoch too
        a, b = _batches(l0, epoch), _batches(l2, epoch)
        assert len(a) == len(b) == 2
        for (ia, xa, ma), (ib, xb, mb) in zip(a, b):
            assert ia == ib and torch.equal(xa, xb) and torch.equal(ma, mb)
    assert not torch.equal(_batches(l0, 0)[0][1], _batches(l0, 1)[0][1]) or \
        _batches(l0, 0)[0][0] != _batches(l0, 1)[0][0]


def test_resumed_loader_yields_the_rest_of_the_epoch(real_root):
    ds = TuSimpleDataset(real_root, size=(72, 200), val_fraction=0.0)
    full = [b["index"].tolist() for b in _iter(build_loader(ds, 2, seed=9), 4)]
    resumed = build_loader(ds, 2, seed=9, start_index=4)
    assert len(resumed) == len(full) - 2
    assert [b["index"].tolist() for b in _iter(resumed, 4)] == full[2:]


def _iter(loader, epoch):
    loader.sampler.set_epoch(epoch)
    return list(loader)


def test_evaluation_loaders_share_the_training_worker_policy(synth_root):
    """One policy: evaluation workers come from the fork server and persist, as training's do;
    each frame is in exactly one rank's shard, in order, without padding."""
    from lanenb_trainer.data.loader import build_eval_loader, build_loader
    from lanenb_trainer.data.tusimple import TuSimpleDataset

    ds = TuSimpleDataset(synth_root, "test", size=(64, 160), normalize=False)
    train = build_loader(ds, 2, num_workers=1)
    world = min(3, len(ds))
    shards = [build_eval_loader(ds, 2, rank=r, world_size=world, num_workers=1) for r in range(world)]
    for loader in shards:
        assert loader.persistent_workers and loader.multiprocessing_context is not None
        assert loader.multiprocessing_context.get_start_method() == train.multiprocessing_context.get_start_method()
    seen = [int(i) for loader in shards for batch in loader for i in batch["index"]]
    assert sorted(seen) == list(range(len(ds)))
    assert build_eval_loader(ds, 2, rank=len(ds), world_size=len(ds) + 1) is None  # an empty shard


@pytest.mark.parametrize("workers", [0, 1])
def test_starting_a_loader_leaves_the_global_rng_alone(synth_root, workers):
    """The global RNG drives dropout and is saved in checkpoints; a loader that drew its
    workers' seed from it would shift every later dropout mask of a resumed run (whose
    loaders start at other moments than the original run's)."""
    from lanenb_trainer.data.loader import build_eval_loader, build_loader
    from lanenb_trainer.data.tusimple import TuSimpleDataset

    ds = TuSimpleDataset(synth_root, "test", size=(64, 160), normalize=False)
    for loader in (build_loader(ds, 2, num_workers=workers), build_eval_loader(ds, 2, num_workers=workers)):
        torch.manual_seed(7)
        before = torch.get_rng_state()
        next(iter(loader))
        assert torch.equal(torch.get_rng_state(), before)
