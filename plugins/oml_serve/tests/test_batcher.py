"""``MicroBatcher``: concurrent submissions run through the model together, each caller getting its own row (equal to
an unbatched forward pass), at most ``max_batch`` at a time; a failing item fails only its own caller."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch
from oml_serve.batcher import MicroBatcher
from torch import Tensor, nn


def tiny_model() -> nn.Module:
    """A small CNN, its default initialisation seeded."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(
            nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)
        ).eval()


def test_concurrent_items_share_forward_passes_and_each_gets_its_own_row():
    model = tiny_model()
    generator = torch.Generator().manual_seed(1)
    inputs = [torch.randn(3, 16, 16, generator=generator) for _ in range(10)]
    threads = set()

    def run_batch(items: list[Tensor]) -> list[Tensor]:
        threads.add(threading.get_ident())
        with torch.no_grad():
            return list(model(torch.stack(items)))

    async def submit_all() -> tuple[list[Tensor], list[int]]:
        batcher = MicroBatcher(run_batch, max_batch=4, max_wait_ms=50)
        results = await asyncio.gather(*(batcher.submit(x) for x in inputs))
        await batcher.aclose()
        return results, list(batcher.batch_sizes)

    results, sizes = asyncio.run(submit_all())
    # all ten were waiting when the worker started: full batches, then the rest after the wait
    assert sizes == [4, 4, 2]
    with torch.no_grad():
        for x, row in zip(inputs, results, strict=True):
            torch.testing.assert_close(row, model(x[None])[0], atol=1e-6, rtol=0)
    (thread,) = threads  # one thread of its own, never the event loop's
    assert thread != threading.get_ident()


def test_an_item_alone_waits_at_most_max_wait_and_later_ones_start_a_new_batch():
    async def scenario() -> list[int]:
        batcher = MicroBatcher(lambda items: [2 * i for i in items], max_batch=8, max_wait_ms=10)
        assert await batcher.submit(1) == 2
        assert await asyncio.gather(batcher.submit(2), batcher.submit(3)) == [4, 6]
        await batcher.aclose()
        return list(batcher.batch_sizes)

    assert asyncio.run(scenario()) == [1, 2]


def test_a_failing_item_fails_only_its_own_caller():
    def run_batch(items: list[int]) -> list[int]:
        if any(i < 0 for i in items):
            raise ValueError(f"negative item in {items}")
        return [i * 10 for i in items]

    async def scenario() -> tuple[list[object], list[int]]:
        batcher = MicroBatcher(run_batch, max_batch=8, max_wait_ms=0)
        results = await asyncio.gather(*(batcher.submit(i) for i in (1, -1, 2)), return_exceptions=True)
        await batcher.aclose()
        return results, list(batcher.batch_sizes)

    results, sizes = asyncio.run(scenario())
    assert results[0] == 10 and results[2] == 20
    assert isinstance(results[1], ValueError) and str(results[1]) == "negative item in [-1]"
    assert sizes == [3, 1, 1, 1]  # the batch, then each item alone


@pytest.mark.parametrize(("max_batch", "max_wait_ms"), [(0, 1.0), (1, -1.0), (1, float("nan"))])
def test_bad_limits_are_refused(max_batch, max_wait_ms):
    with pytest.raises(ValueError, match="max_batch must be >= 1|max_wait_ms must be >= 0"):
        MicroBatcher(lambda items: items, max_batch=max_batch, max_wait_ms=max_wait_ms)
