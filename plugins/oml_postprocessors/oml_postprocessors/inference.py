"""Batched inference of a pairwise model over a dataset of pairs (and over pairs of a dataset's items, by their
indices: OML's ``oml.inference.pairwise_inference``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import FloatTensor, LongTensor, Tensor

from oml_core.inference.batches import TStep, batched_inference, model_device
from oml_core.interfaces.datasets import IBaseDataset, IPairsDataset
from oml_core.interfaces.models import IPairwiseModel
from oml_postprocessors.pairs import PairDataset


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
    accumulate_on_cpu: bool = True,
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
        accumulate_on_cpu: Gather the scores on the CPU (else on the model's device).

    Returns:
        ``[len(pairs)]`` float32 scores (on the CPU with ``accumulate_on_cpu``), in the order of the pairs.

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
        accumulate_on_cpu=accumulate_on_cpu,
        desc="Pairwise inference",
    )
    return torch.cat(scores) if scores else torch.zeros(0)


def pairwise_inference_by_ids(
    model: IPairwiseModel,
    base_dataset: IBaseDataset,
    pair_ids: Sequence[tuple[int, int]] | LongTensor,
    num_workers: int,
    batch_size: int,
    verbose: bool = True,
    use_fp16: bool = False,
    accumulate_on_cpu: bool = True,
) -> FloatTensor:
    """OML's ``pairwise_inference`` (``oml_core.inference.pairwise_inference``, OML's signature): score the pairs
    ``pair_ids`` of items of ``base_dataset`` (:class:`~oml_postprocessors.pairs.PairDataset`) with
    :func:`pairwise_inference`.

    Args:
        model: Pairwise model; ``predict`` must return one score per pair.
        base_dataset: The items (``base_dataset[i][base_dataset.input_tensors_key]`` are the model's inputs).
        pair_ids: ``[n_pairs, 2]`` indices of the two items of every pair (a list of pairs or a tensor).
        num_workers: Number of workers of the ``DataLoader``.
        batch_size: Number of pairs per batch.
        verbose: Set ``True`` to see a progress bar.
        use_fp16: As in :func:`pairwise_inference`.
        accumulate_on_cpu: Gather the scores on the CPU (else on the model's device).

    Returns:
        ``[n_pairs]`` float32 scores, in the order of ``pair_ids``.

    Raises:
        ValueError: ``pair_ids`` is not ``[n_pairs, 2]`` indices of ``base_dataset``; see
            :func:`pairwise_inference`.
    """
    pairs = PairDataset(base_dataset, torch.as_tensor(pair_ids, dtype=torch.long).reshape(-1, 2))
    return pairwise_inference(
        model,
        pairs,
        num_workers=num_workers,
        batch_size=batch_size,
        verbose=verbose,
        use_fp16=use_fp16,
        accumulate_on_cpu=accumulate_on_cpu,
    )


__all__ = ["model_device", "pairwise_inference", "pairwise_inference_by_ids"]
