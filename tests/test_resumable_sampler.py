"""``ResumableBatchSampler``: an epoch stopped after t batches and resumed in fresh objects yields the same
batches, with the same random augmentations, and leaves the random state as the uninterrupted run does,
whether the loader prefetches a batch ahead or not."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

from oml_core.lightning.resumable import ResumableBatchSampler
from oml_core.utils.rng_state import get_rng_state, set_rng_state

N_ITEMS, BATCH = 20, 4  # 5 batches an epoch


class RandomlyAugmented(Dataset):
    """Every item draws from the three global generators, like an augmentation."""

    def __len__(self) -> int:
        return N_ITEMS

    def __getitem__(self, i: int) -> tuple[int, float]:
        return i, float(torch.rand(1)) + np.random.rand() + random.random()


def fresh_loader(seed: int = 0) -> tuple[DataLoader, ResumableBatchSampler, dict[str, torch.Generator]]:
    generator = torch.Generator().manual_seed(seed)
    sampler = ResumableBatchSampler(
        BatchSampler(RandomSampler(range(N_ITEMS), generator=generator), BATCH, drop_last=True),
        {"g": generator},
    )
    return (
        DataLoader(RandomlyAugmented(), batch_sampler=sampler, generator=generator),
        sampler,
        {"g": generator},
    )


def steps(loader: DataLoader, prefetch: bool, stop_after: int | None = None):
    """Run an epoch like Lightning's loop: a training step (which draws too) after each batch, the next batch
    fetched before the step when ``prefetch``; stop after ``stop_after`` steps (the checkpoint moment)."""
    iterator = iter(loader)
    record = []
    batch = next(iterator, None)
    while batch is not None:
        following = next(iterator, None) if prefetch else None
        record.append((batch[0].tolist(), batch[1].tolist(), float(torch.randn(1))))  # the step's own draw
        if stop_after is not None and len(record) == stop_after:
            return record
        batch = following if prefetch else next(iterator, None)
    return record


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("stopped_after", [1, 3, 4])
def test_a_resumed_epoch_goes_on_exactly(prefetch, stopped_after):
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    loader, _, _ = fresh_loader()
    straight = [steps(loader, prefetch) for _ in range(3)]
    after = get_rng_state({})

    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    loader, sampler, generators = fresh_loader()
    first = steps(loader, prefetch)
    second_head = steps(loader, prefetch, stop_after=stopped_after)
    checkpoint = {"rng": get_rng_state(generators), "loader": sampler.state_dict(batches_done=stopped_after)}
    assert first == straight[0] and second_head == straight[1][:stopped_after]

    torch.manual_seed(123), np.random.seed(123), random.seed(123)  # a new process: other random state
    loader, sampler, generators = fresh_loader(seed=99)
    set_rng_state(checkpoint["rng"], generators)
    sampler.load_state_dict(checkpoint["loader"])
    second_tail = steps(loader, prefetch)
    third = steps(loader, prefetch)
    assert second_tail == straight[1][stopped_after:]
    assert third == straight[2]
    assert torch.equal(get_rng_state({})["torch"], after["torch"])
    assert get_rng_state({})["numpy"] == after["numpy"] and get_rng_state({})["python"] == after["python"]


def test_state_dict_needs_a_started_epoch_and_load_needs_every_generator():
    _, sampler, _ = fresh_loader()
    with pytest.raises(RuntimeError, match="no epoch has started"):
        sampler.state_dict(batches_done=1)
    loader, sampler, _ = fresh_loader()
    steps(loader, prefetch=False, stop_after=2)
    state = sampler.state_dict(batches_done=2)
    assert state["batches_done"] == 2 and state["rng_after_batch"] is None  # batch 2 not handed out yet
    with pytest.raises(KeyError, match=r"generator\(s\) \['g'\]"):
        sampler.load_state_dict({**state, "epoch_start": {}})


def test_len_is_the_wrapped_samplers():
    _, sampler, _ = fresh_loader()
    assert len(sampler) == N_ITEMS // BATCH
