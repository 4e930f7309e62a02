"""The batched inference loop shared by the extractors' inference (:mod:`oml_core.inference.flat`) and the
pairwise models' inference of the post-processors: a model over a dataset, batch after batch, in order."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

#: ``step(batch, device)``: the model's outputs for one batch of the ``DataLoader``, its inputs moved to
#: ``device`` (the model's).
TStep = Callable[[Any, torch.device], Tensor]


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (or buffer); the CPU for a model that has neither."""
    first = next(itertools.chain(model.parameters(), model.buffers()), None)
    return torch.device("cpu") if first is None else first.device


def evaluation_loader(dataset: Dataset, batch_size: int, num_workers: int = 0) -> DataLoader:
    """A ``DataLoader`` over ``dataset`` in order, for inference and validation, that draws nothing from the
    global RNG.

    Every iterator of a ``DataLoader`` draws its workers' base seed from the loader's generator, the global RNG
    when it has none, even with ``num_workers=0``. A training run's augmentations draw from the global RNG too,
    so an evaluation loader without a generator of its own would make a run's training depend on how often it
    validates. This loader draws from its own generator (seeded 0: the order is fixed and the workers' seeds
    are the same at every pass).
    """
    generator = torch.Generator().manual_seed(0)
    return DataLoader(
        dataset, batch_size=batch_size, num_workers=num_workers, shuffle=False, generator=generator
    )


def check_batch_size(batch_size: Any) -> int:
    """``batch_size`` if it is an int >= 1 (bools refused).

    Raises:
        ValueError: ``batch_size`` is not an int >= 1 (the message names the argument).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    return batch_size


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Put ``model`` in eval mode for the ``with`` block; its train/eval mode is restored afterwards, also when
    the block raises."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def _precision(device: torch.device, use_fp16: bool) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` to float16 when ``use_fp16`` and ``device`` is a CUDA device; else nothing."""
    if use_fp16 and device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.float16)
    return contextlib.nullcontext()


def batched_inference(
    model: nn.Module,
    dataset: Dataset,
    step: TStep,
    batch_size: int,
    num_workers: int = 0,
    verbose: bool = False,
    use_fp16: bool = False,
    accumulate_on_cpu: bool = True,
    desc: str = "Inference",
) -> list[Tensor]:
    """Run ``step`` over the batches of ``dataset`` with ``model`` in eval mode, under ``torch.no_grad()``.

    The items are loaded in order by a ``DataLoader`` (``batch_size``, ``num_workers``, ``shuffle=False``,
    default collation); ``step(batch, device)`` gets each batch and the model's device (:func:`model_device`),
    moves the inputs it needs there and returns the model's outputs. The model's train/eval mode is restored
    afterwards (:func:`eval_mode`), also on error.

    Args:
        model: The model that ``step`` calls; its mode and device are handled here.
        dataset: The items, batched in order.
        step: Computes the outputs of one batch (see :data:`TStep`).
        batch_size: Number of items per batch.
        num_workers: Number of workers of the ``DataLoader``.
        verbose: Set ``True`` to see a progress bar (tqdm, on stderr) titled ``desc``.
        use_fp16: Run ``step`` under ``torch.autocast`` to float16 when the model is on a CUDA device; on any
            other device this has no effect (the model runs in its own precision).
        accumulate_on_cpu: Move every batch's outputs to the CPU (else they stay where ``step`` put them).
        desc: The progress bar's title.

    Returns:
        The outputs of every batch, in order: detached, float32, on the CPU with ``accumulate_on_cpu``. An
        empty list for an empty dataset.

    Raises:
        ValueError: ``batch_size`` is not an int >= 1; ``num_workers`` is negative (from the ``DataLoader``).
    """
    loader = evaluation_loader(dataset, check_batch_size(batch_size), num_workers)
    device = model_device(model)
    outputs = []
    with eval_mode(model), torch.no_grad(), _precision(device, use_fp16):
        for batch in tqdm(loader, desc=desc, disable=not verbose):
            out = step(batch, device).detach().float()
            outputs.append(out.cpu() if accumulate_on_cpu else out)
    return outputs


__all__ = ["TStep", "batched_inference", "check_batch_size", "eval_mode", "evaluation_loader", "model_device"]
