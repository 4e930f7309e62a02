"""``EmbeddingMetrics``: accumulate the embeddings of a validation epoch, then compute retrieval metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from copy import deepcopy
from pprint import pprint
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import FloatTensor, LongTensor, Tensor

from oml_core.functional.metrics import (
    OVERALL_CATEGORIES_KEY,
    RETRIEVAL_METRIC_KIND,
    TCategories,
    TMetricsDict,
    calc_retrieval_metrics,
    calc_topological_metrics,
    reduce_metrics,
    requested_top_k,
)
from oml_core.interfaces.datasets import IQueryGalleryLabeledDataset
from oml_core.interfaces.metrics import IBasicMetric
from oml_core.retrieval.retrieval_results import RetrievalResults, dataset_column

if TYPE_CHECKING:
    from oml_core.registry import Registry

#: Columns (or ``extra_data`` keys) of a dataset holding the category of every item (OML's is ``category``).
CATEGORIES_COLUMNS = ("category", "categories")


def calc_retrieval_metrics_rr(
    rr: RetrievalResults,
    query_categories: TCategories | None = None,
    cmc_top_k: tuple[int, ...] = (5,),
    precision_top_k: tuple[int, ...] = (5,),
    map_top_k: tuple[int, ...] = (5,),
    reduce: bool = True,
    verbose: bool = True,
    registry: Registry | None = None,
    **other_top_k: tuple[int, ...],
) -> TMetricsDict:
    """Retrieval metrics of ``RetrievalResults``: :func:`~oml_core.functional.metrics.calc_retrieval_metrics`
    on ``rr.retrieved_ids`` and ``rr.gt_ids``.

    Returns:
        ``{"cmc": {k: value}, "precision": {...}, "map": {...}, ...}`` (0-d tensors when ``reduce``, else
        ``[n_query]`` tensors); with ``query_categories``, ``{"OVERALL": {...}, category: {...}, ...}``.

    Raises:
        ValueError: ``rr`` has no ground truth.
    """
    if rr.gt_ids is None:
        raise ValueError(
            "retrieval metrics need ground truth, but these retrieval results have none (gt_ids=None)"
        )
    return calc_retrieval_metrics(
        retrieved_ids=rr.retrieved_ids,
        gt_ids=rr.gt_ids,
        query_categories=query_categories,
        cmc_top_k=cmc_top_k,
        precision_top_k=precision_top_k,
        map_top_k=map_top_k,
        reduce=reduce,
        verbose=verbose,
        registry=registry,
        **other_top_k,
    )


def flatten_metrics(metrics: Mapping[Any, Any], sep: str = "/") -> dict[str, float]:
    """Flatten nested metrics into OML's logging keys: ``{"OVERALL/cmc/1": 0.75, "OVERALL/pcf/0.5": 0.2}``.

    Keys are joined with ``sep`` (``str(key)`` of every level); values become python floats.

    Raises:
        ValueError: a value holding more than one number (per-query metrics must be reduced first).
    """
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, Mapping):
            for sub_key, sub_value in flatten_metrics(value, sep).items():
                flat[f"{key}{sep}{sub_key}"] = sub_value
            continue
        array = value.detach().cpu() if isinstance(value, Tensor) else np.asarray(value)
        n_values = array.numel() if isinstance(array, Tensor) else array.size
        if n_values != 1:
            raise ValueError(
                f"metric {key!r} holds {tuple(array.shape)} values; reduce the metrics before flattening"
            )
        flat[str(key)] = float(array.reshape(-1)[0])
    return flat


def get_categories(dataset: Any) -> np.ndarray | None:
    """The category of every item of ``dataset``, or ``None`` when it has no categories.

    Read from its ``category`` (or ``categories``) column in ``dataset.extra_data`` / ``dataset.df``, or
    else by mapping its labels with ``dataset.get_label2category()``.
    """
    categories = dataset_column(dataset, CATEGORIES_COLUMNS)
    if categories is None:
        get_label2category = getattr(dataset, "get_label2category", None)
        label2category = get_label2category() if callable(get_label2category) else None
        if not label2category:
            return None
        labels = np.asarray(dataset.get_labels())
        missing = sorted({label for label in labels.tolist() if label not in label2category}, key=str)
        if missing:
            raise ValueError(f"get_label2category() has no category for the label(s) {missing[:10]}")
        categories = np.asarray([label2category[label] for label in labels.tolist()])
    if len(categories) != len(dataset):
        raise ValueError(f"got {len(categories)} categories for a dataset of {len(dataset)} items")
    return categories


class EmbeddingMetrics(IBasicMetric):
    """Accumulates the embeddings of a dataset batch by batch, then computes retrieval and topological
    metrics.

    Retrieval metrics are not additive, so they are computed once all the embeddings have been collected:
    :meth:`compute_metrics` retrieves the ``max(k)`` closest gallery items of every query
    (:meth:`RetrievalResults.from_embeddings`, in memory-bounded chunks) and evaluates every metric ``<name>``
    with a ``<name>_top_k`` (looked up in the registry, kind ``retrieval_metric``), per query category too
    when the dataset has categories, plus ``pcf`` (:func:`~oml_core.functional.metrics.calc_pcf`).

    Args:
        dataset: Annotated dataset having a query/gallery split.
        cmc_top_k: Values of ``k`` to calculate ``cmc@k`` (Cumulative Matching Characteristic).
        precision_top_k: Values of ``k`` to calculate ``precision@k``.
        map_top_k: Values of ``k`` to calculate ``map@k`` (Mean Average Precision).
        pcf_variance: Values in range ``[0, 1]`` to calculate the Principal Components Fraction for.
        return_only_overall_category: Set ``True`` to return only the metrics over all the queries.
        verbose: Set ``True`` to print the metrics.
        registry: Where metric functions are looked up (``default_registry()`` when ``None``).
        other_top_k: ``<name>_top_k`` values of other registered retrieval metrics.

    After :meth:`compute_metrics`: ``self.retrieval_results``, ``self.metrics`` (reduced, all categories) and
    ``self.metrics_unreduced`` (per-query tensors) are kept.

    Raises:
        UnknownNameError: a ``<name>_top_k`` whose metric no loaded plugin registers.
        TypeError: an argument that is neither known nor ``<name>_top_k``.
    """

    def __init__(
        self,
        dataset: IQueryGalleryLabeledDataset,
        cmc_top_k: tuple[int, ...] = (5,),
        precision_top_k: tuple[int, ...] = (5,),
        map_top_k: tuple[int, ...] = (5,),
        pcf_variance: tuple[float, ...] = (0.5,),
        return_only_overall_category: bool = False,
        verbose: bool = True,
        registry: Registry | None = None,
        **other_top_k: tuple[int, ...],
    ) -> None:
        self.dataset = dataset
        self.top_k = requested_top_k(cmc_top_k, precision_top_k, map_top_k, **other_top_k)
        self.cmc_top_k = self.top_k.get("cmc", ())
        self.precision_top_k = self.top_k.get("precision", ())
        self.map_top_k = self.top_k.get("map", ())
        self.pcf_variance = tuple(pcf_variance or ())
        self.return_only_overall_category = return_only_overall_category
        self.verbose = verbose
        if registry is None:
            from oml_core.registry import default_registry

            registry = default_registry()
        self.registry = registry
        for name in self.top_k:
            registry.get(RETRIEVAL_METRIC_KIND, name)  # an unknown metric fails now, not after an epoch

        self.retrieval_results: RetrievalResults | None = None
        self.metrics: TMetricsDict | None = None
        self.metrics_unreduced: TMetricsDict | None = None
        self.num_samples: int | None = None
        self._embeddings: Tensor | None = None
        self._collected: torch.Tensor | None = None

    def setup(self, num_samples: int | None = None) -> None:
        """Forget everything collected and computed; expect ``num_samples`` items (``len(dataset)``)."""
        self.retrieval_results = None
        self.metrics = None
        self.metrics_unreduced = None
        self.num_samples = len(self.dataset) if num_samples is None else int(num_samples)
        self._embeddings = None
        self._collected = torch.zeros(self.num_samples, dtype=torch.bool)

    def update(self, embeddings: FloatTensor, indices: LongTensor | Sequence[int]) -> None:
        """Store the embeddings of one batch at their global dataset indices.

        Args:
            embeddings: ``[batch, dim]`` representations of the dataset items of the batch.
            indices: Global indices of those items within ``(0, num_samples - 1)``; any order, and an index
                seen again overwrites the stored embedding.
        """
        if self._collected is None or self.num_samples is None:
            self.setup()
        assert self._collected is not None and self.num_samples is not None
        indices_t = torch.as_tensor(indices, dtype=torch.long).reshape(-1).cpu()
        if embeddings.ndim != 2 or len(embeddings) != len(indices_t):
            raise ValueError(
                f"expected [batch, dim] embeddings with one index each, got {tuple(embeddings.shape)} for "
                f"{len(indices_t)} indices"
            )
        if indices_t.numel() and (int(indices_t.min()) < 0 or int(indices_t.max()) >= self.num_samples):
            raise ValueError(
                f"indices must be within [0, {self.num_samples - 1}], got {indices_t.tolist()[:10]}..."
            )
        if self._embeddings is None:
            self._embeddings = torch.zeros(
                self.num_samples, embeddings.shape[1], dtype=embeddings.dtype, device=embeddings.device
            )
        elif embeddings.shape[1] != self._embeddings.shape[1]:
            raise ValueError(f"embeddings of dim {embeddings.shape[1]} after dim {self._embeddings.shape[1]}")
        self._embeddings[indices_t.to(self._embeddings.device)] = embeddings.detach().to(self._embeddings)
        self._collected[indices_t] = True

    @property
    def embeddings(self) -> Tensor | None:
        """The ``[num_samples, dim]`` embeddings collected so far in dataset order (``None`` before any)."""
        return self._embeddings

    def compute_metrics(self) -> TMetricsDict:
        """Compute the metrics over the collected embeddings.

        Returns:
            ``{"OVERALL": {"cmc": {1: tensor}, "precision": {...}, "map": {...}, "pcf": {0.5: tensor}},
            category1: {...}, ...}`` with 0-d tensors; the category entries are present when the dataset has
            categories and ``return_only_overall_category`` is ``False``.

        Raises:
            ValueError: not every item of the dataset has been collected.
        """
        if self._collected is None or self._embeddings is None:
            raise ValueError(
                "no embeddings were collected: call setup() and update() before compute_metrics()"
            )
        n_collected = int(self._collected.sum())
        if n_collected != self.num_samples:
            raise ValueError(
                f"Metrics have to be calculated on fully collected data: collected {n_collected} out of "
                f"{self.num_samples} samples."
            )
        embeddings = self._embeddings
        max_k = max((k for top_k in self.top_k.values() for k in top_k), default=1)
        self.retrieval_results = RetrievalResults.from_embeddings(embeddings, self.dataset, n_items=max_k)

        categories = get_categories(self.dataset)
        query_categories = None
        if categories is not None:
            query_ids = torch.as_tensor(self.dataset.get_query_ids(), dtype=torch.long).cpu().numpy()
            query_categories = categories[query_ids]

        metrics_r: TMetricsDict = {}
        if self.top_k:
            top_k_kwargs = {"cmc_top_k": (), "precision_top_k": (), "map_top_k": ()}
            top_k_kwargs.update({f"{name}_top_k": top_k for name, top_k in self.top_k.items()})
            metrics_r = calc_retrieval_metrics_rr(
                self.retrieval_results,
                query_categories=query_categories,
                reduce=False,
                verbose=False,
                registry=self.registry,
                **top_k_kwargs,
            )
        metrics_t = calc_topological_metrics(embeddings, self.pcf_variance, categories=categories)

        if categories is None:
            unreduced = {OVERALL_CATEGORIES_KEY: {**metrics_r, **metrics_t}}
        else:
            # the categories of the queries (those of the whole dataset when no retrieval metric is asked for)
            keys = metrics_r if self.top_k else metrics_t
            unreduced = {cat: {**metrics_r.get(cat, {}), **metrics_t.get(cat, {})} for cat in keys}
        self.metrics_unreduced = unreduced
        self.metrics = reduce_metrics(unreduced)

        if self.return_only_overall_category:
            output = {OVERALL_CATEGORIES_KEY: deepcopy(self.metrics[OVERALL_CATEGORIES_KEY])}
        else:
            output = deepcopy(self.metrics)
        if self.verbose:
            print("\nMetrics:")
            pprint(output)
        return output


__all__ = [
    "CATEGORIES_COLUMNS",
    "EmbeddingMetrics",
    "calc_retrieval_metrics_rr",
    "flatten_metrics",
    "get_categories",
]
