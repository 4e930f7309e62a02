"""Process-group helpers: rank and world size that work without DDP, and gathering python dicts."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

MERGEABLE_TYPES = (list, tuple, torch.Tensor, np.ndarray)


def is_ddp() -> bool:
    """True when a ``torch.distributed`` default process group is initialised."""
    return dist.is_available() and dist.is_initialized()


def get_rank_safe() -> int:
    """The rank of this process (``0`` without a process group)."""
    return dist.get_rank() if is_ddp() else 0


def get_world_size_safe() -> int:
    """The number of processes of the default group (``1`` without a process group)."""
    return dist.get_world_size() if is_ddp() else 1


def is_main_process() -> bool:
    """True unless a process group is initialised and this process is not rank 0."""
    return get_rank_safe() == 0


class WarningDDP(UserWarning):
    """OML's warning category for a DDP helper called without a process group (OML's ``patch_dataloader_to_ddp``
    and ``sync_dicts_ddp`` warn then). oml's helpers do not warn: without a process group they document that
    they return their input unchanged. The category is here so that code filtering it
    (``warnings.filterwarnings("ignore", category=WarningDDP)``) runs."""


def comm_device() -> torch.device:
    """Where the tensors of the default group's collectives must live: the current CUDA device under NCCL,
    else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def merge_list_of_dicts(
    list_of_dicts: Sequence[dict[str, Any]], device: torch.device | str = "cpu"
) -> dict[str, Any]:
    """Merge dicts of the same keys value by value, in the order of ``list_of_dicts``.

    Lists and tuples are chained (keeping their type), tensors are concatenated along dim 0 on ``device``,
    numpy arrays along axis 0.

    Raises:
        ValueError: the dicts differ in their keys or in the types of their values.
        TypeError: a value is not a list, tuple, tensor or numpy array.
    """
    if not list_of_dicts:
        return {}
    first = list_of_dicts[0]
    layout = {(key, type(value)) for key, value in first.items()}
    for position, sample in enumerate(list_of_dicts):
        for key, value in sample.items():
            if not isinstance(value, MERGEABLE_TYPES):
                raise TypeError(
                    f"merge_list_of_dicts: the value of {key!r} is a {type(value).__name__}; only lists, tuples, "
                    f"tensors and numpy arrays can be merged"
                )
        if {(key, type(value)) for key, value in sample.items()} != layout:
            raise ValueError(
                f"merge_list_of_dicts: dict {position} has the keys/types "
                f"{sorted((k, type(v).__name__) for k, v in sample.items())}, dict 0 has "
                f"{sorted((k, type(v).__name__) for k, v in first.items())}"
            )
    merged: dict[str, Any] = {}
    for key, value in first.items():
        parts = [sample[key] for sample in list_of_dicts]
        if isinstance(value, list | tuple):
            merged[key] = type(value)(itertools.chain.from_iterable(parts))
        elif isinstance(value, torch.Tensor):
            merged[key] = torch.cat([part.to(device) for part in parts], dim=0)
        else:
            merged[key] = np.concatenate(parts, axis=0)
    return merged


def sync_dicts_ddp(
    outputs_from_device: dict[str, Any], world_size: int, device: torch.device | str = "cpu"
) -> dict[str, Any]:
    """Gather ``outputs_from_device`` from every process and merge them (see :func:`merge_list_of_dicts`),
    rank 0's values first.

    Every process of the group must call it (it waits for all of them). The dicts travel pickled
    (``all_gather_object``), so with the NCCL backend the intermediate bytes live on CUDA. Without an
    initialised process group, or with ``world_size == 1``, ``outputs_from_device`` is returned unchanged.

    Args:
        outputs_from_device: This process's dict of lists, tuples, tensors or numpy arrays.
        world_size: The number of processes (``trainer.world_size``).
        device: Where the merged tensors are put.

    Raises:
        ValueError: ``world_size`` differs from the process group's size, or the dicts of the processes
            differ in keys or value types.
        TypeError: a value cannot be merged.
    """
    if not is_ddp() or world_size == 1:
        return outputs_from_device
    if world_size != dist.get_world_size():
        raise ValueError(
            f"sync_dicts_ddp: world_size={world_size}, but the process group has {dist.get_world_size()} processes"
        )
    gathered: list[dict[str, Any]] = [{} for _ in range(world_size)]
    dist.all_gather_object(gathered, outputs_from_device)
    return merge_list_of_dicts(gathered, device)


__all__ = [
    "WarningDDP",
    "comm_device",
    "get_rank_safe",
    "get_world_size_safe",
    "is_ddp",
    "is_main_process",
    "merge_list_of_dicts",
    "sync_dicts_ddp",
]
