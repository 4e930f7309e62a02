"""Cross-device negatives: the training batch of every process gathered before the miner and the loss, with the
gradients flowing back to each process's own embeddings."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from oml_core.ddp.utils import comm_device, get_rank_safe, get_world_size_safe


class _ScaleGradient(torch.autograd.Function):
    """The identity forward; the gradient multiplied by ``factor`` backward."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, tensor: Tensor, factor: float) -> Tensor:
        ctx.factor = factor  # type: ignore[attr-defined]
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: Tensor) -> tuple[Tensor, None]:
        return grad * ctx.factor, None  # type: ignore[attr-defined]


def _gather_rows(tensor: Tensor, sizes: list[int]) -> list[Tensor]:
    """Every process's ``tensor`` (``sizes[r]`` rows in process ``r``, the other dimensions equal), detached, on
    ``tensor``'s device: padded to the largest size for ``all_gather``, then cut back."""
    padded = torch.zeros((max(sizes), *tensor.shape[1:]), dtype=tensor.dtype, device=comm_device())
    padded[: len(tensor)] = tensor.detach()
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded)
    return [part[:size].to(tensor.device) for part, size in zip(parts, sizes, strict=True)]


def gather_across_devices(embeddings: Tensor, labels: Tensor | Sequence[int]) -> tuple[Tensor, Tensor]:
    """The embeddings and labels of every process's batch, concatenated in rank order (rank 0's first): the
    global batch, for a miner and a loss that see the negatives of every device.

    This process's ``embeddings`` keep their autograd graph in their own slot; the other processes' are constants.
    The gradient that reaches ``embeddings`` is multiplied by the number of processes, so that once DDP averaged
    the gradients over the processes, every parameter's gradient is that of one process computing the loss on
    the concatenated batch: the extractor's (each process back-propagates its own share of the batch) and the
    criterion's (each process computes it in full, the same). It holds for a loss that every process computes
    alike (a miner that samples at random draws from each process's generator).

    Every process of the group must call it (a collective). The batches may differ in size between processes
    (their sizes are gathered first). Memory: every process holds the ``N x B`` embeddings and labels of ``N``
    processes' batches of ``B``, and a miner's distance matrix grows to ``N*B x N*B``.

    Args:
        embeddings: This process's embeddings, ``[B, ...]`` (the same trailing shape and dtype in every process).
        labels: This process's labels, ``B`` of them.

    Returns:
        The gathered embeddings and labels (a tensor on ``embeddings``' device). Without an initialised process
        group, or in a group of one process, ``embeddings`` and ``labels`` as a tensor, unchanged.

    Raises:
        ValueError: ``embeddings`` and ``labels`` differ in length.
    """
    labels = torch.as_tensor(labels, device=embeddings.device)
    if len(embeddings) != len(labels):
        raise ValueError(
            f"gather_across_devices: {len(embeddings)} embeddings but {len(labels)} labels in this process's batch"
        )
    world_size = get_world_size_safe()
    if world_size == 1:
        return embeddings, labels
    size = torch.tensor([len(embeddings)], device=comm_device())
    sizes_parts = [torch.empty_like(size) for _ in range(world_size)]
    dist.all_gather(sizes_parts, size)
    sizes = [int(part.item()) for part in sizes_parts]
    gathered = _gather_rows(embeddings, sizes)
    rank = get_rank_safe()
    gathered[rank] = _ScaleGradient.apply(embeddings, float(world_size))
    return torch.cat(gathered), torch.cat(_gather_rows(labels, sizes))


__all__ = ["gather_across_devices"]
