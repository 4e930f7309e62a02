"""Retrieval metrics of the other reference systems, on OML's ragged inputs.

Every function here follows the calling convention of :mod:`oml_core.functional.metrics`:
``fn(gt_tops, n_gts, top_k, **context) -> list[FloatTensor]`` where ``gt_tops[i][j]`` tells whether the
``j``-th item retrieved for query ``i`` (closest first) is relevant, ``n_gts[i]`` is the number of relevant
items in the gallery, and one ``[n_queries]`` float tensor is returned per ``k`` in ``top_k``. The math is
vectorised over padded chunks of queries (:func:`~oml_core.functional.ragged_tops.per_query`).

Notation: :math:`\\textrm{rel}_j \\in \\{0, 1\\}` is the relevance of the ``j``-th retrieved item (``0`` past
the end of the retrieved list), :math:`\\textrm{hits}@k = \\sum_{j \\le k} \\textrm{rel}_j`, and
:math:`n` is ``n_gt``.

Conventions (each function documents its own as well):

- Unlike OML's cmc/precision/map, ``k`` is NOT clipped to the number of retrieved items: an item that was
  not retrieved is simply not relevant. So recall, nDCG and mAP@K (denominators ``min(k, n)``, ``n``) are
  penalised for what a truncated list misses, and classic precision keeps the denominator ``k``
  (``adaptive_k=True`` clips it, as torchmetrics' option of that name).
- A query with no ground truth (``n_gt == 0``) and nothing retrieved is a perfect answer, ``1`` (OML's
  convention; fall-out excepted, whose perfect value is ``0``, see :func:`calc_fallout`). A query with no
  ground truth but something retrieved scores ``0`` (the notebook's ``max(..., 1)`` denominator for recall,
  torchmetrics' "no positive target" default ``neg`` for the others).
- Fall-out needs the number of gallery items each query could retrieve (``n_gallery``); a query without any
  non-relevant gallery item is handled by ``empty_target_action`` as in torchmetrics, ``"skip"`` giving
  ``nan`` (left out by :func:`~oml_core.functional.metrics.reduce_metrics`, which uses ``nanmean``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import BoolTensor, Tensor  # noqa: F401  (BoolTensor: used by the doctest examples)

from oml_core.functional.ragged_tops import hits_at, per_query, precision_at_hits_cumsum, value_at
from oml_core.utils.checks import as_int_tensor, check_n_gallery

#: What to do with a query whose metric is undefined (torchmetrics' ``empty_target_action``).
EMPTY_TARGET_ACTIONS = ("neg", "pos", "skip", "error")
_EMPTY_TARGET_VALUES = {"neg": 0.0, "pos": 1.0, "skip": float("nan")}


def check_empty_target_action(empty_target_action: str) -> str:
    """``empty_target_action`` itself; ``ValueError`` unless it is one of :data:`EMPTY_TARGET_ACTIONS`."""
    if empty_target_action not in EMPTY_TARGET_ACTIONS:
        raise ValueError(
            f"empty_target_action must be one of {EMPTY_TARGET_ACTIONS}, got {empty_target_action!r}"
        )
    return empty_target_action


def apply_empty_target_action(
    values: Tensor, empty: Tensor, empty_target_action: str, metric: str, reason: str
) -> Tensor:
    """Replace the values of the ``empty`` queries (a ``[n_queries]`` bool mask) as torchmetrics does for its
    ``empty_target_action``.

    ``"neg"``: ``0``; ``"pos"``: ``1``; ``"skip"``: ``nan`` (the query is left out of the average);
    ``"error"``: ``ValueError`` naming the first such query and ``reason`` (e.g. "no positive target").
    """
    check_empty_target_action(empty_target_action)
    if empty_target_action == "error":
        if empty.any():
            query = int(torch.nonzero(empty)[0])
            raise ValueError(
                f"{metric}: query {query} has {reason} and empty_target_action='error' "
                f"(use 'neg', 'pos' or 'skip' to give such queries 0, 1 or leave them out)"
            )
        return values
    return values.masked_fill(empty, _EMPTY_TARGET_VALUES[empty_target_action])


def _ratio(numerator: Tensor, denominator: Tensor) -> Tensor:
    """``numerator / denominator`` in float64, ``0`` where the denominator is ``0``."""
    positive = denominator > 0
    return torch.where(positive, numerator.double() / torch.where(positive, denominator.double(), 1.0), 0.0)


def calc_recall(
    gt_tops: Sequence[Tensor], n_gts: Sequence[int] | Tensor, top_k: tuple[int, ...], verbose: bool = False
) -> list[Tensor]:
    """Recall at cutoffs ``top_k`` with the denominator ``min(k, n_gt)`` (the notebook's, seed 004).

    .. math::
        \\textrm{recall}@k = \\frac{\\textrm{hits}@k}{\\min(k, n)}

    ``k`` is not clipped to the number of retrieved items (a relevant item not retrieved is missed).
    ``n == 0``: ``0`` if something was retrieved (the notebook divides by ``max(min(k, n), 1)``), ``1`` if
    nothing was (OML's convention).

    Example:
        >>> calc_recall([BoolTensor([1, 0, 1]), BoolTensor([0, 1])], [4, 1], top_k=(1, 3))
        [tensor([1., 0.]), tensor([0.6667, 1.0000])]
    """

    def chunk(tops: Tensor, lengths: Tensor, n_gt: Tensor, ks: tuple[int, ...]) -> list[Tensor]:
        return [_ratio(hits, n_gt.clamp(max=k)) for k, hits in zip(ks, hits_at(tops, ks))]

    return per_query(gt_tops, n_gts, top_k, verbose, "Recall", chunk)


def _first_hit_rank(tops: Tensor) -> Tensor:
    """1-based rank of the first relevant item of every padded row (float64), ``inf`` if there is none."""
    n, n_cols = tops.shape
    if n_cols == 0:
        return torch.full((n,), float("inf"), dtype=torch.float64, device=tops.device)
    ranks = torch.arange(1, n_cols + 1, dtype=torch.float64, device=tops.device)
    return torch.where(tops, ranks, float("inf")).amin(dim=1)


def calc_mrr(
    gt_tops: Sequence[Tensor], n_gts: Sequence[int] | Tensor, top_k: tuple[int, ...], verbose: bool = False
) -> list[Tensor]:
    """Reciprocal rank at cutoffs ``top_k`` (its mean over queries is the MRR@k).

    .. math::
        \\textrm{rr}@k = \\frac{1}{r} \\textrm{ if } r \\le k \\textrm{ else } 0, \\qquad
        r = \\min\\{j : \\textrm{rel}_j = 1\\}

    ``n == 0``: ``0`` if something was retrieved, ``1`` if nothing was (OML's convention).

    Example:
        >>> calc_mrr([BoolTensor([0, 0, 1]), BoolTensor([1]), BoolTensor([0, 0])], [1, 1, 1], top_k=(1, 3))
        [tensor([0., 1., 0.]), tensor([0.3333, 1.0000, 0.0000])]
    """

    def chunk(tops: Tensor, lengths: Tensor, n_gt: Tensor, ks: tuple[int, ...]) -> list[Tensor]:
        rank = _first_hit_rank(tops)
        return [torch.where(rank <= k, 1.0 / rank, 0.0) for k in ks]

    return per_query(gt_tops, n_gts, top_k, verbose, "MRR", chunk)


def calc_ndcg(
    gt_tops: Sequence[Tensor], n_gts: Sequence[int] | Tensor, top_k: tuple[int, ...], verbose: bool = False
) -> list[Tensor]:
    """Normalised Discounted Cumulative Gain at cutoffs ``top_k``, binary relevance.

    .. math::
        \\textrm{DCG}@k = \\sum_{j=1}^{k} \\frac{\\textrm{rel}_j}{\\log_2(j + 1)}, \\qquad
        \\textrm{IDCG}@k = \\sum_{j=1}^{\\min(k, n)} \\frac{1}{\\log_2(j + 1)}, \\qquad
        \\textrm{nDCG}@k = \\frac{\\textrm{DCG}@k}{\\textrm{IDCG}@k}

    (the notebook's gain :math:`2^{rel} - 1` equals :math:`rel` for binary relevance; the ideal ranking puts
    the ``n`` relevant items first). ``n == 0``: ``0`` if something was retrieved (torchmetrics), ``1`` if
    nothing was (OML's convention).

    Example:
        >>> calc_ndcg([BoolTensor([0, 1]), BoolTensor([1, 0])], [1, 1], top_k=(2,))
        [tensor([0.6309, 1.0000])]
    """

    def chunk(tops: Tensor, lengths: Tensor, n_gt: Tensor, ks: tuple[int, ...]) -> list[Tensor]:
        positions = torch.arange(2, max(ks) + 2, dtype=torch.float64, device=tops.device)
        discounts = 1.0 / torch.log2(positions)
        dcg = torch.cumsum(tops * discounts[: tops.shape[1]], dim=1)
        ideal = torch.cumsum(discounts, dim=0)
        out = []
        for k in ks:
            n_ideal = n_gt.clamp(max=k)
            idcg = torch.where(n_ideal > 0, ideal[(n_ideal - 1).clamp(min=0)], 0.0)
            out.append(_ratio(value_at(dcg, k), idcg))
        return out

    return per_query(gt_tops, n_gts, top_k, verbose, "nDCG", chunk)


def calc_precision_classic(
    gt_tops: Sequence[Tensor],
    n_gts: Sequence[int] | Tensor,
    top_k: tuple[int, ...],
    adaptive_k: bool = False,
    verbose: bool = False,
) -> list[Tensor]:
    """Classic precision at cutoffs ``top_k``: the denominator is ``k`` (torchmetrics, the notebook).

    .. math::
        \\textrm{precision}@k = \\frac{\\textrm{hits}@k}{k}

    so, unlike OML's :func:`~oml_core.functional.metrics.calc_precision`, an ideal model scores ``n / k``
    when ``n < k``. With ``adaptive_k`` the denominator is ``min(k, m)``, ``m`` the number of retrieved
    items (torchmetrics' ``adaptive_k``). ``n == 0``: ``0`` if something was retrieved, ``1`` if nothing was
    (OML's convention).

    Example:
        >>> calc_precision_classic([BoolTensor([1, 0, 1]), BoolTensor([1])], [2, 3], top_k=(2, 4))
        [tensor([0.5000, 0.5000]), tensor([0.5000, 0.2500])]
    """
    if not isinstance(adaptive_k, bool):
        raise ValueError(f"adaptive_k must be a bool, got {adaptive_k!r}")

    def chunk(tops: Tensor, lengths: Tensor, n_gt: Tensor, ks: tuple[int, ...]) -> list[Tensor]:
        return [
            _ratio(hits, lengths.clamp(max=k) if adaptive_k else torch.full_like(lengths, k))
            for k, hits in zip(ks, hits_at(tops, ks))
        ]

    return per_query(gt_tops, n_gts, top_k, verbose, "Precision (classic)", chunk)


def calc_map_r(
    gt_tops: Sequence[Tensor], n_gts: Sequence[int] | Tensor, top_k: tuple[int, ...], verbose: bool = False
) -> list[Tensor]:
    """TF Similarity's mAP@K: average precision whose denominator is ``R = n_gt``, the class size.

    .. math::
        \\textrm{mAP}@k = \\frac{1}{R} \\sum_{j=1}^{k} \\textrm{rel}_j \\times P@j, \\qquad
        P@j = \\frac{\\textrm{hits}@j}{j}

    Unlike OML's map@k (denominator: the hits in the top ``k``), the relevant items not retrieved in the top
    ``k`` lower the score: with ``R = 100`` and ``k = 50``, ten hits in first places give ``0.10`` and ten
    hits in the last places ``0.0117``. ``R == 0``: ``0`` if something was retrieved (TF Similarity would
    divide by zero), ``1`` if nothing was (OML's convention).

    Example:
        >>> calc_map_r([BoolTensor([1, 0, 1]), BoolTensor([0, 1])], [4, 1], top_k=(3,))
        [tensor([0.4167, 0.5000])]
    """

    def chunk(tops: Tensor, lengths: Tensor, n_gt: Tensor, ks: tuple[int, ...]) -> list[Tensor]:
        precision_sum = precision_at_hits_cumsum(tops)
        return [_ratio(value_at(precision_sum, k), n_gt) for k in ks]

    return per_query(gt_tops, n_gts, top_k, verbose, "mAP@K (TF Similarity)", chunk)


def calc_fallout(
    gt_tops: Sequence[Tensor],
    n_gts: Sequence[int] | Tensor,
    top_k: tuple[int, ...],
    n_gallery: int | Sequence[int] | Tensor,
    empty_target_action: str = "neg",
    verbose: bool = False,
) -> list[Tensor]:
    """Fall-out at cutoffs ``top_k`` (torchmetrics' ``RetrievalFallOut``): the share of the query's
    non-relevant gallery items that are retrieved in the top ``k``. Lower is better.

    .. math::
        \\textrm{fallout}@k = \\frac{\\min(k, m) - \\textrm{hits}@k}{N - n}

    with ``m`` the number of retrieved items and ``N`` the number of gallery items the query could retrieve
    (``n_gallery``). A query with no non-relevant item (``N == n``) is handled by ``empty_target_action``:
    ``"neg"`` gives ``0`` (the default: nothing could be falsely retrieved, as torchmetrics' functional
    ``retrieval_fall_out``; its class ``RetrievalFallOut`` defaults to ``"pos"``), ``"pos"`` gives ``1``,
    ``"skip"`` gives ``nan`` (left out of the ``nanmean`` of
    :func:`~oml_core.functional.metrics.reduce_metrics`) and ``"error"`` raises. A query with nothing to find
    and nothing retrieved but negatives in the gallery gets ``0``, the perfect fall-out.

    Args:
        gt_tops: ``gt_tops[i][j]`` is ``True`` if the ``j``-th item retrieved for query ``i`` is relevant.
        n_gts: Number of relevant gallery items of every query.
        top_k: Values of ``k``.
        n_gallery: Number of gallery items every query could retrieve: an int for all, or one per query.
        empty_target_action: ``"neg"``, ``"pos"``, ``"skip"`` or ``"error"`` (see above).
        verbose: Set ``True`` to see a progress bar.

    Raises:
        ValueError: a bad ``empty_target_action`` or ``n_gallery`` (of the wrong length, or smaller than the
            relevant plus the non-relevant retrieved items of a query), or ``"error"`` and such a query.

    Example:
        >>> calc_fallout([BoolTensor([1, 0, 0]), BoolTensor([1])], [1, 1], top_k=(1, 2), n_gallery=[5, 1])
        [tensor([0., 0.]), tensor([0.2500, 0.0000])]
    """
    check_empty_target_action(empty_target_action)
    n_gallery_t = check_n_gallery(n_gallery, len(gt_tops))

    def chunk(tops: Tensor, lengths: Tensor, n_gt: Tensor, ks: tuple[int, ...]) -> list[Tensor]:
        return [lengths.clamp(max=k) - hits for k, hits in zip(ks, hits_at(tops, ks))]

    false_alarms = per_query(gt_tops, n_gts, top_k, verbose, "Fall-out", chunk, nothing_to_find_value=None)
    n_gts_t = as_int_tensor(n_gts, "n_gts")
    negatives = n_gallery_t - n_gts_t
    retrieved_negatives = torch.stack(false_alarms).amax(dim=0)
    bad = (negatives < 0) | (retrieved_negatives > negatives)
    if bad.any():
        i = int(torch.nonzero(bad)[0])
        raise ValueError(
            f"n_gallery of query {i} ({int(n_gallery_t[i])}) is smaller than its {int(n_gts_t[i])} relevant "
            f"items plus the {int(retrieved_negatives[i])} non-relevant items retrieved for it"
        )
    empty = negatives == 0
    return [
        apply_empty_target_action(
            _ratio(values, negatives), empty, empty_target_action, "fallout", "no non-relevant gallery item"
        ).float()
        for values in false_alarms
    ]


__all__ = [
    "EMPTY_TARGET_ACTIONS",
    "apply_empty_target_action",
    "calc_fallout",
    "calc_map_r",
    "calc_mrr",
    "calc_ndcg",
    "calc_precision_classic",
    "calc_recall",
    "check_empty_target_action",
]
