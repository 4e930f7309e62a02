"""Batched inference of a pairwise model over a dataset of pairs."""

from __future__ import annotations

import torch
from torch import FloatTensor, Tensor

from oml_core.inference.batches import TStep, batched_inference, model_device
from oml_core.interfaces.datasets import IPairsDataset
from oml_core.interfaces.models import IPairwiseModel


def _scores_step(model: IPairwiseModel, pairs: IPairsDataset) -> TStep:
    """The step of :func:`~oml_core.inference.batches.batched_inference` that scores one batch of pairs."""

    def step(batch: dict[str, Tensor], device: torch.device) -> Tensor:
        x1 = batch[pairs.pairs_1st_key].to(device)
        x2 = batch[pairs.pairs_2nd_key].to(device)
        out = model.predict(x1, x2)
        if out.numel() != len(x1):
            raise ValueError(
                f"{type(model).__name__}.predict must return one score per pair, got the shape "
                f"{tuple(out.shape)} for a batch of {len(x1)} pairs"
            )
        return out.reshape(-1)

    return step


def pairwise_inference(
    model: IPairwiseModel,
    pairs: IPairsDataset,
    num_workers: int,
    batch_size: int,
    verbose: bool = False,
    use_fp16: bool = False,
) -> FloatTensor:
    """Score every pair of ``pairs`` with ``model.predict(x1, x2)``.

    The pairs are loaded in order by a ``DataLoader`` (``batch_size``, ``num_workers``, default collation); the
    two sides of every batch (``batch[pairs.pairs_1st_key]``, ``batch[pairs.pairs_2nd_key]``) are moved to the
    model's device (:func:`~oml_core.inference.batches.model_device`) and scored with the model in eval mode
    under ``torch.no_grad()``; the model's train/eval mode is restored afterwards
    (:func:`~oml_core.inference.batches.batched_inference`).

    Args:
        model: Pairwise model; ``predict`` must return one score per pair (``[B]`` or ``[B, 1]``).
        pairs: Dataset of pairs.
        num_workers: Number of workers of the ``DataLoader``.
        batch_size: Number of pairs per batch.
        verbose: Set ``True`` to see a progress bar.
        use_fp16: Run the model under ``torch.autocast`` to float16 when it is on a CUDA device; on any other
            device this has no effect (the model runs in its own precision).

    Returns:
        ``[len(pairs)]`` float32 scores on the CPU, in the order of the pairs.

    Raises:
        ValueError: ``predict`` returned another number of scores than the batch has pairs; ``batch_size`` is
            not an int >= 1.
    """
    scores = batched_inference(
        model,
        pairs,
        _scores_step(model, pairs),
        batch_size=batch_size,
        num_workers=num_workers,
        verbose=verbose,
        use_fp16=use_fp16,
        desc="Pairwise inference",
    )
    return torch.cat(scores) if scores else torch.zeros(0)


__all__ = ["model_device", "pairwise_inference"]
