"""``PairwiseScorer``: the arguments every pairwise post-processor shares, checked, and the scoring of pairs."""

from __future__ import annotations

from typing import Any

from torch import FloatTensor

from oml_core.interfaces.datasets import IPairsDataset
from oml_core.interfaces.models import IPairwiseModel
from oml_postprocessors.inference import pairwise_inference


def _check_int(value: Any, name: str, minimum: int) -> int:
    """``value`` if it is an int (bools refused) of at least ``minimum``; else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _check_bool(value: Any, name: str) -> bool:
    """``value`` if it is a bool; else ``TypeError`` naming ``name``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


class PairwiseScorer:
    """Base of the pairwise post-processors: a pairwise model re-scores the pairs (query, retrieved item) of the
    ``top_n`` items retrieved for every query.

    Args:
        top_n: Model will be applied to the ``num_queries * top_n`` pairs formed by each query and its
            ``top_n`` most relevant galleries (fewer when fewer were retrieved). At least 2: re-ranking a
            single item cannot change an order (OML's rule).
        pairwise_model: Model which is able to take two items as inputs and estimate the *distance* (not in a
            strictly mathematical sense) between them: smaller is closer.
        num_workers: Number of workers in DataLoader.
        batch_size: Batch size that will be used in DataLoader.
        verbose: Set ``True`` if you want to see progress bar for an inference.
        use_fp16: Set ``True`` to use half precision: ``torch.autocast`` to float16 when the model is on a CUDA
            device; it has no effect on the CPU (the model runs in its own precision there).

    Raises:
        ValueError: ``top_n`` is not an int >= 2, ``num_workers`` not an int >= 0, ``batch_size`` not an
            int >= 1.
        TypeError: ``pairwise_model`` is not an ``IPairwiseModel``; ``verbose`` or ``use_fp16`` not a bool.
    """

    def __init__(
        self,
        top_n: int,
        pairwise_model: IPairwiseModel,
        num_workers: int,
        batch_size: int,
        verbose: bool = False,
        use_fp16: bool = False,
    ) -> None:
        if not isinstance(pairwise_model, IPairwiseModel):
            raise TypeError(
                "pairwise_model must be an instance of oml_core.interfaces.models.IPairwiseModel, got "
                f"{type(pairwise_model).__name__}"
            )
        self._top_n = _check_int(top_n, "top_n", 2)
        self.model = pairwise_model
        self.num_workers = _check_int(num_workers, "num_workers", 0)
        self.batch_size = _check_int(batch_size, "batch_size", 1)
        self.verbose = _check_bool(verbose, "verbose")
        self.use_fp16 = _check_bool(use_fp16, "use_fp16")

    @property
    def top_n(self) -> int:
        """Number of gallery items closest to each query to process."""
        return self._top_n

    def score(self, pairs: IPairsDataset) -> FloatTensor:
        """``[len(pairs)]`` float32 CPU scores of ``pairs`` (:func:`~oml_postprocessors.inference.pairwise_inference`
        with this post-processor's model and settings)."""
        return pairwise_inference(
            self.model,
            pairs,
            num_workers=self.num_workers,
            batch_size=self.batch_size,
            verbose=self.verbose,
            use_fp16=self.use_fp16,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(top_n={self.top_n}, pairwise_model={type(self.model).__name__}, "
            f"num_workers={self.num_workers}, batch_size={self.batch_size}, verbose={self.verbose}, "
            f"use_fp16={self.use_fp16})"
        )


__all__ = ["PairwiseScorer"]
