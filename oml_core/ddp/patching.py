"""Split what a sampler yields among the DDP processes, and patch a ``DataLoader`` to do so."""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from typing import Any, cast

import torch
from torch.utils.data import BatchSampler, DataLoader, Sampler

from oml_core.ddp.utils import get_rank_safe, get_world_size_safe, is_ddp
from oml_core.interfaces.samplers import IBatchSampler

TAllSamplers = BatchSampler | Sampler | IBatchSampler


def is_batch_sampler(sampler: Any) -> bool:
    """True for samplers that yield whole batches (torch's ``BatchSampler`` and ``IBatchSampler``)."""
    return isinstance(sampler, BatchSampler | IBatchSampler)


class DDPSamplerWrapper(Sampler):
    """This is a wrapper to allow using a custom sampler in DDP mode: every process gets its share of what the
    wrapped sampler yields.

    - A batch sampler (``BatchSampler``, ``IBatchSampler`` such as ``BalanceSampler``): **every batch** is split
      into ``num_replicas`` contiguous parts and the process ``rank`` gets the part ``rank``. So the processes
      train on the same batches as a single process would, each on its share of every batch: the union of
      what the processes see at a step is the single-process batch (and a sampler's batch size is the global
      one). Contiguous parts keep the labels of a ``BalanceSampler`` batch whole on a process.
    - Any other sampler (``SequentialSampler``, ``RandomSampler``, yielding indices): the epoch's indices are
      split into ``num_replicas`` contiguous parts, as ``DistributedSampler`` splits a dataset.

    The wrapped sampler must yield the same sequence in every process (samplers take a seeded generator).

    Args:
        sampler: Sequential or batch sampler.
        shuffle_samples_between_gpus: Shuffle the items of every batch (or of the epoch) before they are
            split, with a generator seeded by ``seed + epoch`` (the same permutation in every process). Note,
            that shuffle inside a process after the feeding is up to the sampler.
        pad_data_to_num_gpus: When a batch (or the epoch) is not evenly divisible by the number of processes,
            every process must still get the same amount of data: repeat items from its start
            (``True``), or discard its last items (``False``).
        num_replicas: The number of processes (default: the world size of the process group, 1 without one).
        rank: This process's rank (default: the rank in the process group, 0 without one).
        seed: Seed of the shuffling.

    Raises:
        ValueError: ``rank`` is not in ``[0, num_replicas)``.
    """

    def __init__(
        self,
        sampler: TAllSamplers,
        shuffle_samples_between_gpus: bool = True,
        pad_data_to_num_gpus: bool = True,
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
        seed: int = 0,
    ) -> None:
        self.sampler = sampler
        self.shuffle = shuffle_samples_between_gpus
        self.pad = pad_data_to_num_gpus
        self.num_replicas = get_world_size_safe() if num_replicas is None else num_replicas
        self.rank = get_rank_safe() if rank is None else rank
        if self.num_replicas < 1 or not 0 <= self.rank < self.num_replicas:
            raise ValueError(
                f"DDPSamplerWrapper: rank must be in [0, num_replicas), got rank={self.rank} and "
                f"num_replicas={self.num_replicas}"
            )
        self.seed = seed
        self.epoch = 0
        self.yields_batches = is_batch_sampler(sampler)

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch that seeds the shuffling: call it before every epoch when shuffling (Lightning calls it
        when the wrapper is a loader's ``sampler``; as a ``batch_sampler`` it is up to you)."""
        self.epoch = epoch

    def __len__(self) -> int:
        """The number of batches (batch samplers) or indices (other samplers) this process gets in an epoch."""
        n = len(self.sampler)  # type: ignore[arg-type]
        if self.yields_batches:
            return n
        return math.ceil(n / self.num_replicas) if self.pad else n // self.num_replicas

    def __iter__(self) -> Iterator[Any]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch) if self.shuffle else None
        if self.yields_batches:
            for batch in self.sampler:
                yield self.share(list(batch), generator)
        else:
            yield from self.share(list(self.sampler), generator)

    def share(self, items: list[Any], generator: torch.Generator | None = None) -> list[Any]:
        """This process's contiguous part of ``items`` (shuffled by ``generator`` first when given), padded or
        cut to a multiple of ``num_replicas``.

        Raises:
            ValueError: without padding, ``items`` has fewer elements than there are processes.
        """
        if generator is not None:
            items = [items[i] for i in torch.randperm(len(items), generator=generator).tolist()]
        n = len(items)
        if self.pad:
            total = math.ceil(n / self.num_replicas) * self.num_replicas
            items = (items * math.ceil(total / n))[:total] if n else items
        else:
            total = n - n % self.num_replicas
            if total == 0 and n:
                raise ValueError(
                    f"DDPSamplerWrapper: {n} item(s) cannot be split among {self.num_replicas} processes "
                    f"without padding (pad_data_to_num_gpus=False)"
                )
            items = items[:total]
        per_process = total // self.num_replicas
        return items[self.rank * per_process : (self.rank + 1) * per_process]


def patch_dataloader_to_ddp(loader: DataLoader) -> DataLoader:
    """Function inspects loader and modifies its batch sampler for working in DDP mode.

    The loader's batch sampler (the one it was given, e.g. a ``BalanceSampler``, or the ``BatchSampler`` torch
    made from ``batch_size``/``shuffle``/``drop_last``) is wrapped in a :class:`DDPSamplerWrapper` without
    shuffling and with padding: every process gets a contiguous part of every batch, so one epoch has the same
    number of steps in every process and as without DDP. The other settings of the loader (workers,
    ``collate_fn``, pinning, generator ...) are kept.

    Note:
        We ALWAYS pad, so that every process gets the same amount of data: a batch whose size is not a
        multiple of the number of processes repeats some of its items, and the behaviour with and without DDP
        may be slightly different then (e.g. the loss of that batch).

    Returns:
        A new loader in DDP mode; ``loader`` itself without an initialised process group, or when it is
        already patched.

    Raises:
        ValueError: the loader makes no batches (``batch_size=None``).
    """
    if not is_ddp() or isinstance(loader.batch_sampler, DDPSamplerWrapper):
        return loader
    if loader.batch_sampler is None:
        raise ValueError(
            "patch_dataloader_to_ddp: a loader without batches (batch_size=None) is not supported"
        )
    # torch types it ``Sampler[list] | Iterable[list]``: it is the BatchSampler the loader made or the batch
    # sampler it was given (oml's are ``IBatchSampler``s); the wrapper only iterates it and takes its ``len``
    batch_sampler = cast(TAllSamplers, loader.batch_sampler)
    wrapper = DDPSamplerWrapper(batch_sampler, shuffle_samples_between_gpus=False, pad_data_to_num_gpus=True)
    return DataLoader(
        loader.dataset,
        batch_sampler=wrapper,
        **extract_loader_parameters(loader, ignore_data_related_parameters=True),
    )


#: The arguments of ``DataLoader`` that decide what a loader's batches hold (left out by
#: :func:`extract_loader_parameters` with ``ignore_data_related_parameters``).
DATA_RELATED_LOADER_PARAMETERS = ("sampler", "batch_sampler", "drop_last", "shuffle", "batch_size", "dataset")


def extract_loader_parameters(
    loader: DataLoader, ignore_data_related_parameters: bool = False
) -> dict[str, Any]:
    """The arguments of ``DataLoader.__init__`` that ``loader`` keeps as attributes (``num_workers``,
    ``collate_fn``, ``pin_memory``, ...), to build a loader like it (OML's function).

    Args:
        loader: The loader.
        ignore_data_related_parameters: Leave out :data:`DATA_RELATED_LOADER_PARAMETERS` (the dataset, the
            sampling and the batching).

    Returns:
        ``{argument: loader's value}``.
    """
    ignored = {"self", *(DATA_RELATED_LOADER_PARAMETERS if ignore_data_related_parameters else ())}
    arguments = inspect.signature(DataLoader.__init__).parameters
    return {
        name: getattr(loader, name) for name in arguments if name not in ignored and hasattr(loader, name)
    }


def check_loaders_is_patched(loaders: DataLoader | Any) -> bool:
    """True when every loader of ``loaders`` (one, a sequence or a dict of loaders) is patched to DDP."""
    if isinstance(loaders, DataLoader):
        loaders = [loaders]
    elif isinstance(loaders, dict):
        loaders = list(loaders.values())
    return all(isinstance(loader.batch_sampler, DDPSamplerWrapper) for loader in loaders)


__all__ = [
    "DDPSamplerWrapper",
    "TAllSamplers",
    "DATA_RELATED_LOADER_PARAMETERS",
    "check_loaders_is_patched",
    "extract_loader_parameters",
    "is_batch_sampler",
    "patch_dataloader_to_ddp",
]
