"""Micro-batching: the items of concurrent requests are run through a model in one call.

:class:`MicroBatcher` takes one item per :meth:`~MicroBatcher.submit` (an asyncio coroutine) and runs the items
that arrived together through ``run_batch`` in one call, on a thread of its own, so that the event loop keeps
serving while the model runs. A batch starts with the first item that waits; it takes every item already waiting,
then waits at most ``max_wait_ms`` for more, up to ``max_batch`` items. Each caller gets its own item's result.
When a batch of several items fails, each item is run alone, so that a bad item fails only its own request.

Example::

    batcher = MicroBatcher(lambda xs: model(torch.stack(xs)), max_batch=32, max_wait_ms=2)
    row = await batcher.submit(x)  # model(x[None])[0], computed with the items of concurrent calls
    await batcher.aclose()
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from oml_core.utils.logs import PACKAGE_LOGGER, get_logger

Item = TypeVar("Item")
Result = TypeVar("Result")

log = get_logger(f"{PACKAGE_LOGGER}.{__name__}")
#: How many of the latest batch sizes a batcher keeps.
KEPT_SIZES = 1024


class MicroBatcher(Generic[Item, Result]):
    """Runs the items of concurrent :meth:`submit` calls through ``run_batch`` together.

    Args:
        run_batch: Takes a list of items and returns one result per item, in their order. It runs on the
            batcher's one thread (never two batches at once).
        max_batch: Items per call of ``run_batch`` at most (>= 1).
        max_wait_ms: How long a batch that is not full waits for more items after its first (>= 0 ms).

    Raises:
        ValueError: ``max_batch`` < 1 or ``max_wait_ms`` < 0.
    """

    def __init__(
        self, run_batch: Callable[[list[Item]], Sequence[Result]], max_batch: int, max_wait_ms: float
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if not max_wait_ms >= 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {max_wait_ms}")
        self.run_batch, self.max_batch, self.max_wait = run_batch, max_batch, max_wait_ms / 1000
        #: The sizes of the latest batches (at most :data:`KEPT_SIZES`), in order: what tests and benchmarks read.
        self.batch_sizes: deque[int] = deque(maxlen=KEPT_SIZES)
        #: Calls of ``run_batch`` and the items they took, since the batcher started.
        self.batches_run = 0
        self.items_run = 0
        self._queue: asyncio.Queue[tuple[Item, asyncio.Future[Result]]] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oml-serve-batch")

    async def submit(self, item: Item) -> Result:
        """``run_batch([..., item, ...])``'s result for ``item``, run with the items submitted at about the same
        time. Raises what ``run_batch`` raised for the item (run alone when its batch failed)."""
        if self._worker is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.get_running_loop().create_task(self._work())
        assert self._queue is not None
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        await self._queue.put((item, future))
        return await future

    async def aclose(self) -> None:
        """Stop the worker (items still waiting are cancelled) and its thread."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        if self._queue is not None:
            while not self._queue.empty():
                self._queue.get_nowait()[1].cancel()
        self._executor.shutdown(wait=True)

    async def _work(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            deadline = loop.time() + self.max_wait
            while len(batch) < self.max_batch:
                if not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), remaining))
                except asyncio.TimeoutError:
                    break
            live = [(item, future) for item, future in batch if not future.cancelled()]
            if live:
                await self._run(loop, live)

    async def _run(
        self, loop: asyncio.AbstractEventLoop, batch: list[tuple[Item, asyncio.Future[Result]]]
    ) -> None:
        """Run ``batch`` in one call; when it fails and holds several items, each item alone."""
        items = [item for item, _ in batch]
        self.batch_sizes.append(len(items))
        self.batches_run += 1
        self.items_run += len(items)
        try:
            results = await loop.run_in_executor(self._executor, self._checked_run, items)
        except Exception as error:
            if len(batch) == 1:
                _settle(batch[0][1], error=error)
                return
            log.debug("a batch of %d items failed (%s); running each alone", len(batch), error)
            for pair in batch:
                await self._run(loop, [pair])
            return
        for (_, future), result in zip(batch, results):
            _settle(future, result=result)

    def _checked_run(self, items: list[Item]) -> Sequence[Result]:
        results = self.run_batch(items)
        if len(results) != len(items):
            raise RuntimeError(f"run_batch returned {len(results)} results for {len(items)} items")
        return results


def _settle(
    future: asyncio.Future[Result], *, result: Result | None = None, error: Exception | None = None
) -> None:
    """Give ``future`` its result or error, unless its caller went away (cancelled)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


__all__ = ["KEPT_SIZES", "MicroBatcher"]
