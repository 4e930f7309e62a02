"""Adapters from the input shapes of other systems to oml's per-query retrieval metrics.

These are thin layers: they turn the other system's inputs into OML's ragged ``(gt_tops, n_gts)`` and call
the registered per-query functions (:mod:`oml_core.functional.metrics`,
:mod:`oml_core.functional.ranking_metrics`, or a plugin's), so no formula is implemented twice.

- torchmetrics-style flat inputs ``(preds, target, indexes)``: :func:`calc_grouped_retrieval_metric` (any
  registered metric, grouped by query, with ``top_k``, ``ignore_index``, ``empty_target_action`` and
  ``aggregation``) and single-query functions named and behaving as torchmetrics' functional ones whose
  definition oml shares (:func:`retrieval_fall_out`, :func:`retrieval_reciprocal_rank`,
  :func:`retrieval_normalized_dcg`, :func:`retrieval_precision`, :func:`retrieval_average_precision`).
  The items of a query are ranked by a stable sort on descending ``preds``: tied scores keep the order of
  their rows. torchmetrics (1.x) sets the target of the rows with ``preds <= 0`` to non-relevant in its
  reciprocal rank, precision, recall and average precision; oml does not (a score is only used to rank).
- TensorFlow-Similarity-style ``(query_labels, match_mask)`` with the class sizes ``r``:
  :func:`map_at_k_tf`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch import Tensor

from oml_core.functional.metrics import RETRIEVAL_METRIC_KIND, accepts_keyword, call_retrieval_metric
from oml_core.functional.ranking_metrics import (
    apply_empty_target_action,
    calc_map_r,
    check_empty_target_action,
)
from oml_core.utils.checks import check_int, check_threshold
from oml_core.utils.ragged import Ragged

if TYPE_CHECKING:
    from oml_core.registry import Registry

TAggregation = Literal["mean", "median", "min", "max"] | Callable[[Tensor], Tensor]

#: The aggregations over queries given by name (torchmetrics'); a callable is accepted too.
AGGREGATIONS = ("mean", "median", "min", "max")


def check_aggregation(aggregation: TAggregation) -> TAggregation:
    """``aggregation`` itself; ``ValueError`` unless it is one of :data:`AGGREGATIONS` or a callable."""
    if not callable(aggregation) and aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS} or a callable, got {aggregation!r}")
    return aggregation


def aggregate(values: Tensor, aggregation: TAggregation = "mean") -> Tensor:
    """Aggregate per-query values into a 0-d float tensor, as torchmetrics does.

    The ``nan`` values (queries skipped by ``empty_target_action="skip"``) are left out; if nothing is left
    the result is ``0``. ``"median"`` is ``torch.median`` (the lower of the two middle values); a callable
    receives the 1-D tensor of the kept values and returns a scalar.
    """
    check_aggregation(aggregation)
    kept = values[~torch.isnan(values)].float()
    if kept.numel() == 0:
        return torch.tensor(0.0)
    if callable(aggregation):
        return torch.as_tensor(aggregation(kept), dtype=torch.float32)
    reducers: dict[str, Callable[[Tensor], Tensor]] = {
        "mean": torch.mean,
        "median": torch.median,
        "min": torch.amin,
        "max": torch.amax,
    }
    return reducers[aggregation](kept)


def group_flat_retrieval_inputs(
    preds: Tensor, target: Tensor, indexes: Tensor, ignore_index: int | None = None
) -> tuple[Ragged, Tensor, Tensor]:
    """Turn torchmetrics' flat ``(preds, target, indexes)`` into OML's ragged inputs, one entry per query.

    The three tensors (any equal shapes, flattened) give for every row the score of an item (higher is more
    relevant), whether it is relevant, and the id of its query. Rows whose ``target == ignore_index`` are
    dropped first. Queries come in increasing ``indexes`` order; the items of a query are sorted by
    descending score with a stable sort (ties keep the order of their rows).

    Returns:
        ``(gt_tops, n_gts, n_items)``: the relevance of every query's items in rank order, the number of
        relevant items and the number of items of every query (two ``[n_queries]`` int64 tensors).

    Raises:
        ValueError: tensors of different shapes, ``indexes`` not integers, ``preds`` not floats, ``target``
            not binary (bool, or integers/floats in ``{0, 1}``), a bad ``ignore_index``, or no row left.
    """
    if not (preds.shape == target.shape == indexes.shape):
        raise ValueError(
            f"indexes, preds and target must have the same shape, got {tuple(indexes.shape)}, "
            f"{tuple(preds.shape)} and {tuple(target.shape)}"
        )
    if indexes.dtype.is_floating_point or indexes.dtype.is_complex or indexes.dtype == torch.bool:
        raise ValueError(f"indexes must be a tensor of integers, got {indexes.dtype}")
    if not preds.dtype.is_floating_point:
        raise ValueError(f"preds must be a tensor of floats, got {preds.dtype}")
    check_int(ignore_index, "ignore_index", least=None, allow_none=True)
    preds, target, indexes = preds.flatten(), target.flatten(), indexes.flatten()
    if ignore_index is not None:
        keep = target != ignore_index
        preds, target, indexes = preds[keep], target[keep], indexes[keep]
    if preds.numel() == 0:
        raise ValueError("indexes, preds and target must be non-empty (after dropping ignore_index rows)")
    if target.dtype != torch.bool and not bool(((target == 0) | (target == 1)).all()):
        raise ValueError(
            "target must contain binary values (0/1 or bool): oml's metrics use binary relevance"
        )

    by_score = torch.sort(preds, descending=True, stable=True).indices
    order = by_score[torch.sort(indexes[by_score], stable=True).indices]
    _, n_items = torch.unique_consecutive(indexes[order], return_counts=True)
    relevant = target[order] == 1
    query_of_row = torch.repeat_interleave(torch.arange(len(n_items), device=n_items.device), n_items)
    n_gts = torch.zeros(len(n_items), dtype=torch.long, device=n_items.device)
    n_gts.index_add_(0, query_of_row, relevant.long())
    return Ragged(relevant.cpu(), n_items.cpu()), n_gts.cpu(), n_items.cpu()


def calc_grouped_retrieval_metric(
    name: str,
    preds: Tensor,
    target: Tensor,
    indexes: Tensor,
    top_k: int | None = None,
    ignore_index: int | None = None,
    empty_target_action: str = "neg",
    aggregation: TAggregation = "mean",
    registry: Registry | None = None,
    **metric_kwargs: Any,
) -> Tensor:
    """A registered retrieval metric on torchmetrics' flat inputs, grouped by query and aggregated.

    The rows are grouped by query (:func:`group_flat_retrieval_inputs`), the metric ``name`` is computed for
    every query by its registered per-query function at ``k = top_k``, and the per-query values are
    aggregated (:func:`aggregate`). Each query's ``n_gallery`` is its number of rows.

    ``top_k=None`` considers all the items of every query: ``k`` is the size of the largest query, and a
    metric with an ``adaptive_k`` option (classic precision) gets ``adaptive_k=True`` so that its
    denominator is each query's own size, as torchmetrics does.

    ``empty_target_action`` decides what a query whose metric is undefined counts for (``"neg"``: 0,
    ``"pos"``: 1, ``"skip"``: left out, and ``0`` is returned if all are, ``"error"``: ``ValueError``). A
    metric that takes ``empty_target_action`` itself (fall-out: queries with no negative) gets it; for the
    others the empty queries are those with no relevant row, as in torchmetrics.

    Args:
        name: The registered name of the metric (``"fallout"``, ``"mrr"``, ``"ndcg"``, ...).
        preds: Scores of the rows, higher is more relevant (floats).
        target: Relevance of the rows (bool, or integers/floats in ``{0, 1}``).
        indexes: Query id of every row (integers).
        top_k: ``k``, a positive int, or ``None`` for all the items.
        ignore_index: Rows whose target equals it are dropped.
        empty_target_action: ``"neg"``, ``"pos"``, ``"skip"`` or ``"error"``.
        aggregation: ``"mean"``, ``"median"``, ``"min"``, ``"max"`` or a callable over the per-query tensor.
        registry: Where the metric is looked up (``default_registry()`` when ``None``).
        metric_kwargs: Options of the metric (e.g. ``adaptive_k=True`` for ``precision_classic``).

    Returns:
        A 0-d float tensor.

    Raises:
        UnknownNameError: no plugin registers a metric ``name``.
        ValueError: bad inputs (see :func:`group_flat_retrieval_inputs`), ``top_k``, ``empty_target_action``
            or ``aggregation``; ``"error"`` and an empty query.

    Example (torchmetrics' ``RetrievalFallOut`` example):
        >>> indexes = tensor([0, 0, 0, 1, 1, 1, 1])
        >>> preds = tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
        >>> target = tensor([False, False, True, False, True, False, True])
        >>> calc_grouped_retrieval_metric("fallout", preds, target, indexes, top_k=2)
        tensor(0.5000)
    """
    check_empty_target_action(empty_target_action)
    check_aggregation(aggregation)
    check_int(top_k, "top_k", allow_none=True)
    if registry is None:
        from oml_core.registry import default_registry

        registry = default_registry()
    fn = registry.get(RETRIEVAL_METRIC_KIND, name).load()

    gt_tops, n_gts, n_items = group_flat_retrieval_inputs(preds, target, indexes, ignore_index)
    if top_k is None and accepts_keyword(fn, "adaptive_k", by_name_only=True):
        metric_kwargs["adaptive_k"] = True
    handles_empty = accepts_keyword(fn, "empty_target_action", by_name_only=True)
    if handles_empty:
        metric_kwargs["empty_target_action"] = empty_target_action
    k = int(n_items.max()) if top_k is None else top_k
    context = {"n_gallery": n_items, "verbose": False}
    values = call_retrieval_metric(name, fn, gt_tops, n_gts, (k,), context, **metric_kwargs)[0].float()
    if not handles_empty:
        values = apply_empty_target_action(
            values, n_gts == 0, empty_target_action, name, "no positive target"
        )
    return aggregate(values, aggregation)


def _single_query(
    name: str, preds: Tensor, target: Tensor, top_k: int | None, **metric_kwargs: Any
) -> Tensor:
    """The metric of one query given as torchmetrics' functional ``(preds, target)``; empty counts as 0."""
    indexes = torch.zeros(preds.shape, dtype=torch.long, device=preds.device)
    return calc_grouped_retrieval_metric(name, preds, target, indexes, top_k, **metric_kwargs)


def retrieval_fall_out(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """Fall-out@k of one query (torchmetrics' ``retrieval_fall_out``), by oml's ``fallout``.

    The share of the non-relevant items ranked in the top ``k`` by ``preds``; ``0`` when no item is
    non-relevant.

    Example:
        >>> retrieval_fall_out(tensor([0.2, 0.3, 0.5]), tensor([True, False, True]), top_k=2)
        tensor(1.)
    """
    return _single_query("fallout", preds, target, top_k)


def retrieval_reciprocal_rank(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """Reciprocal rank@k of one query (torchmetrics' ``retrieval_reciprocal_rank``), by oml's ``mrr``;
    ``0`` when no item is relevant."""
    return _single_query("mrr", preds, target, top_k)


def retrieval_normalized_dcg(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """nDCG@k of one query with binary relevance (torchmetrics' ``retrieval_normalized_dcg`` on a binary
    target), by oml's ``ndcg``; ``0`` when no item is relevant."""
    return _single_query("ndcg", preds, target, top_k)


def retrieval_precision(
    preds: Tensor, target: Tensor, top_k: int | None = None, adaptive_k: bool = False
) -> Tensor:
    """Precision@k of one query, denominator ``k`` (torchmetrics' ``retrieval_precision``), by oml's
    ``precision_classic``; ``adaptive_k`` clips ``k`` to the number of items; ``0`` when no item is
    relevant."""
    return _single_query("precision_classic", preds, target, top_k, adaptive_k=adaptive_k)


def retrieval_average_precision(preds: Tensor, target: Tensor, top_k: int | None = None) -> Tensor:
    """Average precision@k of one query (torchmetrics' ``retrieval_average_precision``: the mean of the
    precisions at the relevant items of the top ``k``), which is OML's ``map``; ``0`` when no item is
    relevant."""
    return _single_query("map", preds, target, top_k)


def map_at_k_tf(
    query_labels: Tensor | np.ndarray,
    match_mask: Tensor | np.ndarray,
    r: Mapping[int, int],
    k: int = 5,
    distance_threshold: float = math.inf,
    lookup_distances: Tensor | np.ndarray | None = None,
    average: str = "micro",
) -> Tensor:
    """TensorFlow Similarity's ``MapAtK(r, k, distance_threshold, average).compute(...)``, by oml's ``map_r``.

    .. math::
        \\textrm{mAP}_i@K = \\frac{1}{R_i}\\sum_{j=1}^{K} \\textrm{rel}_{ij} \\times P_i@j

    averaged over the queries (``"micro"``), with ``R_i = r[query_labels[i]]`` the number of indexed examples
    of the query's class (see :func:`~oml_core.functional.ranking_metrics.calc_map_r`).

    Args:
        query_labels: ``[n_queries]`` labels of the queries.
        match_mask: ``[n_queries, n_neighbors]`` bool mask, ``True`` where the ``j``-th neighbour of query ``i``
            (closest first) has the query's label; ``n_neighbors >= k``.
        r: Class id -> number of examples of that class in the index.
        k: Number of neighbours the metric is computed over.
        distance_threshold: A neighbour is a valid match only if its distance is ``<= distance_threshold``
            (``inf``: all are); a finite threshold needs ``lookup_distances``.
        lookup_distances: ``[n_queries, n_neighbors]`` distances of the neighbours.
        average: Only ``"micro"`` (the mean over queries) is supported, as in TF Similarity.

    Returns:
        A 0-d float tensor.

    Raises:
        ValueError: ``average`` other than ``"micro"``, a ``match_mask`` with fewer than ``k`` columns or not
            one row per query, ``lookup_distances`` missing or of another shape, a bad ``k``, a NaN or ``-inf``
            ``distance_threshold`` (:func:`~oml_core.utils.checks.check_threshold`: nothing would match), or a
            label of a query missing from ``r`` (TF Similarity would silently use ``-1``).
        TypeError: ``distance_threshold`` is not a number.

    Example (TF Similarity's: 10 hits in the first or in the last 10 of 50 neighbours, R = 100):
        >>> first, last = torch.zeros(1, 50, dtype=torch.bool), torch.zeros(1, 50, dtype=torch.bool)
        >>> first[0, :10], last[0, 40:] = True, True
        >>> map_at_k_tf(tensor([0]), first, r={0: 100}, k=50), map_at_k_tf(tensor([0]), last, r={0: 100}, k=50)
        (tensor(0.1000), tensor(0.0117))
    """
    if average != "micro":
        raise ValueError(f"Mean Average Precision only supports micro averaging, got average={average!r}")
    check_int(k, "k")
    distance_threshold = check_threshold(distance_threshold, "distance_threshold")
    labels = torch.as_tensor(query_labels)
    matches = torch.as_tensor(match_mask).bool()
    if labels.ndim != 1 or matches.ndim != 2 or matches.shape[0] != labels.shape[0]:
        raise ValueError(
            f"match_mask must be [n_queries, n_neighbors] with one row per query label, got "
            f"{tuple(matches.shape)} for {tuple(labels.shape)} labels"
        )
    if matches.shape[1] < k:
        raise ValueError(
            f"The number of neighbors must be >= K, got {matches.shape[1]} neighbors and K = {k}"
        )
    if lookup_distances is not None:
        distances = torch.as_tensor(lookup_distances)
        if distances.shape != matches.shape:
            raise ValueError(
                f"lookup_distances must have the shape of match_mask {tuple(matches.shape)}, "
                f"got {tuple(distances.shape)}"
            )
        matches = matches & (distances <= distance_threshold)
    elif distance_threshold != math.inf:
        raise ValueError("a finite distance_threshold needs the neighbours' lookup_distances")
    tops = Ragged(matches[:, :k].reshape(-1), torch.full((len(matches),), k))
    return calc_map_r(tops, _class_sizes(labels, r), (k,))[0].mean()


def _class_sizes(labels: Tensor, r: Mapping[int, int]) -> Tensor:
    """``r[label]`` for every label, by binary search in the sorted classes of ``r``.

    Raises:
        ValueError: labels that are not integers, or a label that ``r`` lacks (named).
    """
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ValueError(f"query_labels must be integers, got {labels.dtype}")
    classes, order = torch.sort(torch.tensor(list(r.keys()), dtype=torch.long))
    sizes = torch.tensor(list(r.values()), dtype=torch.long)[order]
    labels = labels.long().cpu()
    position = torch.searchsorted(classes, labels).clamp(max=max(len(classes) - 1, 0))
    found = classes[position] == labels if len(classes) else torch.zeros_like(labels, dtype=torch.bool)
    if not found.all():
        raise ValueError(f"r has no class size for the query labels {labels[~found].unique().tolist()}")
    return sizes[position]


__all__ = [
    "AGGREGATIONS",
    "aggregate",
    "calc_grouped_retrieval_metric",
    "check_aggregation",
    "group_flat_retrieval_inputs",
    "map_at_k_tf",
    "retrieval_average_precision",
    "retrieval_fall_out",
    "retrieval_normalized_dcg",
    "retrieval_precision",
    "retrieval_reciprocal_rank",
]
