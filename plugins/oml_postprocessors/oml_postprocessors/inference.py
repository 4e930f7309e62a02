"""Batched inference of a pairwise model over a dataset of pairs."""

from __future__ import annotations

import contextlib
import itertools

import torch
from torch import FloatTensor, nn
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from oml_core.interfaces.datasets import IPairsDataset
from oml_core.interfaces.models import IPairwiseModel


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (or buffer); the CPU for a model that has neither."""
    first = next(itertools.chain(model.parameters(), model.buffers()), None)
    return torch.device("cpu") if first is None else first.device


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
    model's device (:func:`model_device`) and scored with the model in eval mode under ``torch.no_grad()``;
    the model's train/eval mode is restored afterwards.

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
        ValueError: ``predict`` returned another number of scores than the batch has pairs.
    """
    device = model_device(model)
    loader = DataLoader(pairs, batch_size=batch_size, num_workers=num_workers, shuffle=False)
    precision = (
        torch.autocast(device_type="cuda", dtype=torch.float16)
        if use_fp16 and device.type == "cuda"
        else contextlib.nullcontext()
    )
    scores = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), precision:
            for batch in tqdm(loader, desc="Pairwise inference", disable=not verbose):
                x1 = batch[pairs.pairs_1st_key].to(device)
                x2 = batch[pairs.pairs_2nd_key].to(device)
                out = model.predict(x1, x2)
                if out.numel() != len(x1):
                    raise ValueError(
                        f"{type(model).__name__}.predict must return one score per pair, got the shape "
                        f"{tuple(out.shape)} for a batch of {len(x1)} pairs"
                    )
                scores.append(out.detach().reshape(-1).float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(scores) if scores else torch.zeros(0)


__all__ = ["model_device", "pairwise_inference"]
