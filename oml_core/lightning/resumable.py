"""``ResumableBatchSampler``: a batch sampler whose epoch can be resumed in the middle, exactly.

A training run checkpointed after ``t`` batches of an epoch (a step checkpoint, or an interrupt) must go on
with batch ``t`` of the *same* epoch order and the same augmentations as the uninterrupted run. The wrapper
records what that needs, and replays it on resume:

- the state of the run's generators (the sampler's) when the epoch started, before the wrapped sampler drew
  the epoch's order: on resume they are set back to it, the order is drawn again, and the first ``t`` batches
  are skipped without being loaded;
- the global random state (python, numpy, torch) just before each batch is handed to the loader, i.e. before
  its items are read and augmented: on resume batch ``t`` is loaded from the state it was loaded from; when
  the loader had prefetched it before the step that wrote the checkpoint, the global state goes back to the
  checkpoint's own right after it is loaded again.

The replay is exact with ``num_workers=0`` (the augmentations run in the main process). With worker processes
the batches are the same, but the workers' random streams of the rest of that epoch are new ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch

from oml_core.interfaces.samplers import IBatchSampler
from oml_core.utils.rng_state import get_rng_state, set_rng_state

#: How many of the latest batches' random states are kept (the loader prefetches one batch ahead).
_KEPT_STATES = 4


class ResumableBatchSampler(IBatchSampler):
    """Wraps a batch sampler so that an epoch can be resumed after its first ``t`` batches (see the module).

    Args:
        batch_sampler: The batch sampler (a ``BalanceSampler``, torch's ``BatchSampler``, ...); it must draw
            its randomness from ``generators`` only, so that the same generator states give the same epoch.
        generators: The generators of ``batch_sampler``, by name.
    """

    def __init__(self, batch_sampler: Iterable[list[int]], generators: Mapping[str, torch.Generator]) -> None:
        self.batch_sampler = batch_sampler
        self.generators = dict(generators)
        self._epoch_start: dict[str, torch.Tensor] = {}
        self._states_before: deque[tuple[int, dict[str, Any]]] = deque(maxlen=_KEPT_STATES)
        self._pending: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.batch_sampler)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[list[int]]:
        resume, self._pending = self._pending, None
        # the epoch's own order and random states, or (a new seed) the position only
        replay = resume if resume is not None and "epoch_start" in resume else None
        if replay is not None:
            for name, generator in self.generators.items():
                generator.set_state(replay["epoch_start"][name])
        skip = resume["batches_done"] if resume is not None else 0
        self._epoch_start = {name: generator.get_state() for name, generator in self.generators.items()}
        self._states_before.clear()
        for index, batch in enumerate(self.batch_sampler):
            if index < skip:
                continue
            if replay is not None and index == skip:
                set_rng_state(replay["rng_before_batch"], {})
            self._states_before.append((index, get_rng_state({})))
            yield batch
            if replay is not None and index == skip and replay["rng_after_batch"] is not None:
                set_rng_state(replay["rng_after_batch"], {})  # what the uninterrupted run had from here on

    def state_dict(self, batches_done: int) -> dict[str, Any]:
        """What resuming the current epoch after its first ``batches_done`` batches needs.

        Returns:
            ``epoch_start``: the generators' states when the epoch started; ``batches_done``;
            ``rng_before_batch``: the global random state from which batch ``batches_done`` is to be loaded;
            ``rng_after_batch``: when that batch was already handed out (a loader that prefetches), the global
            random state now, which the resumed run takes up right after loading it again; else None.

        Raises:
            RuntimeError: no epoch has started, or batch ``batches_done`` was handed out too long ago.
        """
        if not self._epoch_start:
            raise RuntimeError("ResumableBatchSampler.state_dict: no epoch has started")
        before = dict(self._states_before)
        now = get_rng_state({})
        if batches_done in before:
            rng_before, rng_after = before[batches_done], now
        elif not self._states_before or batches_done > self._states_before[-1][0]:
            rng_before, rng_after = now, None
        else:
            raise RuntimeError(
                f"ResumableBatchSampler.state_dict: the random state of batch {batches_done} is no longer kept"
            )
        return {
            "epoch_start": dict(self._epoch_start),
            "batches_done": batches_done,
            "rng_before_batch": rng_before,
            "rng_after_batch": rng_after,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume with the next epoch that starts (the next ``iter()``): its order as of :meth:`state_dict`'s
        epoch, its first ``state["batches_done"]`` batches skipped. A ``state`` of ``batches_done`` alone skips
        that many batches of an order drawn anew from the generators as they are (a run resumed with a new seed).

        Raises:
            KeyError: ``state`` has no start state of one of this sampler's generators.
        """
        if "epoch_start" not in state:
            self._pending = {"batches_done": state["batches_done"]}
            return
        missing = set(self.generators) - set(state["epoch_start"])
        if missing:
            raise KeyError(f"the checkpoint has no epoch-start state of the generator(s) {sorted(missing)}")
        self._pending = dict(state)


__all__ = ["ResumableBatchSampler"]
