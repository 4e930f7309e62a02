"""Retrieval and topological metrics with Open Metric Learning's conventions.

Retrieval metrics work on RAGGED inputs: for every query ``i``, ``gt_tops[i]`` is a 1-D bool tensor telling
which of the items retrieved for it (closest first) are relevant, and ``n_gts[i]`` is the number of relevant
items that exist in the gallery. Queries may have different numbers of retrieved items (some may have
none). The per-query math is vectorised: the ragged tops are padded into ``[chunk, max_k]`` bool matrices,
chunk by chunk (:data:`METRICS_CHUNK_SIZE` queries at a time), and no Python loop runs over queries.

Conventions shared by :func:`calc_cmc`, :func:`calc_precision` and :func:`calc_map` (OML's):

- ``k`` larger than the number of items retrieved for a query is clipped to that number, per query
  (``k_i = min(k, len(gt_tops[i]))``); the result is still reported under the ``k`` asked for.
- A query with no ground truth (``n_gt == 0``) and nothing retrieved is a perfect answer: cmc, precision and
  map are ``1``. A query with ground truth but nothing retrieved scores ``0``.
- A query with no ground truth but something retrieved scores ``0`` everywhere (OML divides ``0 / 0`` into
  ``nan`` for precision here; we return ``0`` so that one such query does not poison the mean).

The metrics of the other reference systems (recall, MRR, nDCG, classic precision, fall-out, TF Similarity's
mAP@K) live in :mod:`oml_core.functional.ranking_metrics`, each with its own documented convention.

Calling convention of a retrieval metric. Metrics are looked up by name in the registry (kind
``retrieval_metric``) by :func:`calc_retrieval_metrics`, so a plugin can add a metric ``foo`` and have it
computed with ``foo_top_k=(1, 5)``. The registered function is called as

``fn(gt_tops, n_gts, top_k, **context) -> list[FloatTensor]``

and returns one ``[n_queries]`` float tensor per ``k`` in ``top_k``. :func:`calc_retrieval_metrics` passes
``gt_tops`` as a :class:`~oml_core.utils.ragged.Ragged` (a sequence of 1-D bool tensors, flat underneath) and
``n_gts`` as a ``[n_queries]`` LongTensor; called directly, the built-ins also take a list of tensors and a
list of ints. The context keywords are passed only to
a function whose signature accepts them (by name or through ``**kwargs``):

- ``verbose`` (``bool``): show a progress bar;
- ``n_gallery`` (``[n_queries]`` LongTensor): the number of gallery items each query could have retrieved
  (given to :func:`calc_retrieval_metrics` as ``n_gallery``; fall-out needs it). A function with a
  parameter ``n_gallery`` and no default fails with a ``ValueError`` telling to pass ``n_gallery`` when
  none was given.

Extra keyword arguments for a given metric are passed with ``metric_kwargs={"fallout":
{"empty_target_action": "skip"}}``. A per-query value may be ``nan`` for a query the metric skips (fall-out
with ``empty_target_action="skip"``); :func:`reduce_metrics` averages with ``nanmean``, ignoring them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import BoolTensor, FloatTensor, LongTensor, Tensor
from tqdm.auto import tqdm

from oml_core.utils.misc_torch import iter_chunks
from oml_core.utils.ragged import Ragged

if TYPE_CHECKING:
    from oml_core.registry import Registry

TMetricsDict = dict[Any, Any]
TCategories = Tensor | np.ndarray | Sequence[Any]

#: The key of the metrics computed over all the queries (OML's).
OVERALL_CATEGORIES_KEY = "OVERALL"
#: Kind of the registry entries computed by :func:`calc_retrieval_metrics`.
RETRIEVAL_METRIC_KIND = "retrieval_metric"
#: Suffix of the keyword arguments that request a metric: ``<name>_top_k``.
TOP_K_SUFFIX = "_top_k"
#: Number of queries padded and processed together by the retrieval metrics.
METRICS_CHUNK_SIZE = 2**16
#: Number of rows of the embeddings matrix centred at once when accumulating its covariance.
PCF_CHUNK_SIZE = 2**14


# --------------------------------------------------------------------------------------------- helpers
def check_top_k(top_k: Sequence[int], name: str = "top_k") -> tuple[int, ...]:
    """``top_k`` as a tuple of ints; ``ValueError`` unless it is a non-empty sequence of ints > 0."""
    try:
        values = tuple(top_k)
    except TypeError:
        raise ValueError(f"{name} must be a non-empty sequence of positive integers, got {top_k!r}") from None
    ok = all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k > 0 for k in values)
    if not values or not ok:
        raise ValueError(f"{name} must be a non-empty sequence of positive integers, got {top_k!r}")
    return tuple(int(k) for k in values)


def _check_in_range(values: Sequence[float], min_: float, max_: float, name: str) -> tuple[float, ...]:
    values = tuple(values)
    if not values:
        raise ValueError(f"{name} is expected to be non-empty, got {values}")
    if not all(isinstance(x, (int, float, np.number)) and min_ <= x <= max_ for x in values):
        raise ValueError(f"{name} is expected to contain numbers in range [{min_}, {max_}], got {values}")
    return values


def cat_ragged(seqs: Sequence[Tensor]) -> tuple[Tensor, LongTensor]:
    """Concatenate 1-D tensors of different lengths: ``(flat, lengths)``, ``lengths`` on the CPU.

    A :class:`~oml_core.utils.ragged.Ragged` is already flat: its ``(values, lengths)`` are returned as they are.

    Raises:
        ValueError: an element is not 1-D; the message names its index.
    """
    ragged = Ragged.from_tensors(seqs)
    return ragged.values, ragged.lengths


def pad_ragged(
    seqs: Sequence[Tensor], max_len: int | None = None, fill: float = 0
) -> tuple[Tensor, LongTensor]:
    """Stack 1-D tensors of different lengths into one ``[n, K]`` matrix, without a Python loop for the copy.

    Row ``i`` is ``seqs[i][:K]`` followed by ``fill``; ``K = max(len(s))``, capped at ``max_len`` when given.

    Returns:
        ``(padded, lengths)``: the ``[n, K]`` matrix (dtype of ``torch.cat(seqs)``) and the ``[n]``
        untruncated lengths (on the CPU).

    Raises:
        ValueError: an element is not 1-D; the message names its index.
    """
    ragged = Ragged.from_tensors(seqs)
    return ragged.padded(max_len=max_len, fill=fill), ragged.lengths


def as_long_1d(values: Sequence[int] | Tensor, name: str) -> LongTensor:
    """``values`` as a 1-D LongTensor on the CPU; ``ValueError`` naming ``name`` unless 1-D integers."""
    t = values.detach().cpu() if isinstance(values, Tensor) else torch.as_tensor(np.asarray(values))
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
    if t.numel() and (t.dtype.is_floating_point or t.dtype == torch.bool):
        raise ValueError(f"{name} must hold integers, got {t.dtype}")
    return t.long()


def _iter_padded_tops(
    gt_tops: Sequence[Tensor], n_gts: Sequence[int] | Tensor, max_k: int, verbose: bool, desc: str
) -> Iterator[tuple[Tensor, LongTensor, LongTensor]]:
    """Yield ``(tops [c, K] bool, lengths [c], n_gt [c])`` for every chunk of queries, ``K <= max_k``."""
    n_gts_t = as_long_1d(n_gts, "n_gts")
    if len(gt_tops) != len(n_gts_t):
        raise ValueError(
            f"gt_tops and n_gts must have one entry per query, got {len(gt_tops)} and {len(n_gts_t)}"
        )
    tops_all = Ragged.from_tensors(gt_tops)
    chunks = list(iter_chunks(len(tops_all), METRICS_CHUNK_SIZE))
    for sl in tqdm(chunks, desc=desc, disable=not verbose or len(chunks) < 2):
        chunk = tops_all[sl]
        tops = chunk.padded(max_len=max_k, fill=False).bool()
        yield tops, chunk.lengths.to(tops.device), n_gts_t[sl].to(tops.device)


def _value_at(cumulative: Tensor, k: int) -> Tensor:
    """``cumulative[:, min(k, K) - 1]`` (zeros when ``K == 0``): the running value after ``k`` items."""
    n_cols = cumulative.shape[1]
    if n_cols == 0:
        return torch.zeros(cumulative.shape[0], dtype=cumulative.dtype, device=cumulative.device)
    return cumulative[:, min(k, n_cols) - 1]


def _per_query(
    gt_tops: Sequence[BoolTensor],
    n_gts: Sequence[int] | Tensor,
    top_k: Sequence[int],
    verbose: bool,
    desc: str,
    chunk_fn: Callable[[Tensor, LongTensor, LongTensor, tuple[int, ...]], list[Tensor]],
    nothing_to_find_value: float | None = 1.0,
) -> list[FloatTensor]:
    """Run ``chunk_fn(tops, lengths, n_gt, top_k)`` on every padded chunk of queries and concatenate.

    ``chunk_fn`` returns one ``[chunk]`` tensor per ``k``. The queries with ``n_gt == 0`` and nothing
    retrieved get ``nothing_to_find_value`` (OML's perfect answer, ``1``) unless it is ``None``. The output
    is ``float32`` unless ``chunk_fn`` returns integer counts (kept as ``int64``).
    """
    top_k = check_top_k(top_k)
    parts: list[list[Tensor]] = [[] for _ in top_k]
    for tops, lengths, n_gt in _iter_padded_tops(gt_tops, n_gts, max(top_k), verbose, desc):
        for part, values in zip(parts, chunk_fn(tops, lengths, n_gt, top_k)):
            if nothing_to_find_value is not None:
                values = values.masked_fill((lengths == 0) & (n_gt == 0), nothing_to_find_value)
            part.append(values.float().cpu() if values.dtype.is_floating_point else values.cpu())
    return [torch.cat(part) if part else torch.zeros(0) for part in parts]


def hits_at(tops: Tensor, ks: Sequence[int]) -> list[Tensor]:
    """Number of relevant items among the first ``k`` of every padded row, for every ``k`` (``int64``)."""
    hits = torch.cumsum(tops, dim=1)
    return [_value_at(hits, k) for k in ks]


def precision_at_hits_cumsum(tops: Tensor) -> Tensor:
    """``[n, K]`` running sums of ``P@j * rel_j`` (``P@j``: the fraction of relevant items among the first
    ``j``), in float64: the numerator of OML's map@k and of TF Similarity's mAP@K."""
    hits = torch.cumsum(tops, dim=1).double()
    positions = torch.arange(1, tops.shape[1] + 1, device=tops.device, dtype=torch.float64)
    return torch.cumsum(hits / positions * tops, dim=1)


# ------------------------------------------------------------------------------------ retrieval metrics
def calc_cmc(
    gt_tops: Sequence[BoolTensor], n_gts: Sequence[int], top_k: tuple[int, ...], verbose: bool = False
) -> list[FloatTensor]:
    """Cumulative Matching Characteristics (CMC) at cutoffs ``top_k``, for every query.

    .. math::
        \\textrm{cmc}@k = 1 \\textrm{ if the top-}k \\textrm{ retrieved items include a relevant one, else } 0

    A query with ``n_gt == 0`` and nothing retrieved gets ``1`` (see the module's conventions).

    Args:
        gt_tops: ``gt_tops[i][j]`` is ``True`` if the ``j``-th item retrieved for query ``i`` is relevant.
        n_gts: Number of existing ground truths for every query.
        top_k: Values of ``k`` to calculate ``cmc@k``.
        verbose: Set ``True`` to see a progress bar.

    Returns:
        One ``[n_queries]`` float tensor of ``cmc@k`` values per ``k`` in ``top_k``.

    Example:
        >>> gt_tops = [BoolTensor([1, 0]), BoolTensor([0, 1, 1]), BoolTensor([0, 0]), BoolTensor([])]
        >>> calc_cmc(gt_tops, [2, 2, 1, 0], top_k=(1, 2))
        [tensor([1., 0., 0., 1.]), tensor([1., 1., 0., 1.])]
    """

    def chunk(tops: Tensor, lengths: LongTensor, n_gt: LongTensor, ks: tuple[int, ...]) -> list[Tensor]:
        return [(hits > 0).double() for hits in hits_at(tops, ks)]

    return _per_query(gt_tops, n_gts, top_k, verbose, "CMC", chunk)


def calc_precision(
    gt_tops: Sequence[BoolTensor], n_gts: Sequence[int], top_k: tuple[int, ...], verbose: bool = False
) -> list[FloatTensor]:
    """Precision at cutoffs ``top_k`` with OML's denominator ``min(k, n_gt)``, for every query.

    With :math:`g_1, \\ldots, g_k` the relevance of the first ``k`` retrieved items and :math:`n` the
    number of relevant items in the gallery:

    .. math::
        \\textrm{precision}@k = \\frac{1}{\\min(k, n)} \\sum_{i=1}^{k} g_i

    so an ideal model is not penalised when ``n < k``. ``k`` is clipped per query to the number of retrieved
    items. ``n_gt == 0`` with nothing retrieved gives ``1``; ``n_gt == 0`` with items retrieved gives ``0``.

    Args:
        gt_tops: ``gt_tops[i][j]`` is ``True`` if the ``j``-th item retrieved for query ``i`` is relevant.
        n_gts: Number of existing ground truths for every query.
        top_k: Values of ``k`` to calculate ``precision@k``.
        verbose: Set ``True`` to see a progress bar.

    Returns:
        One ``[n_queries]`` float tensor of ``precision@k`` values per ``k`` in ``top_k``.

    Example:
        >>> gt_tops = [BoolTensor([1, 0]), BoolTensor([0, 1, 1]), BoolTensor([0, 0]), BoolTensor([])]
        >>> calc_precision(gt_tops, [2, 3, 5, 2], top_k=(1, 2))
        [tensor([1., 0., 0., 0.]), tensor([0.5000, 0.5000, 0.0000, 0.0000])]
    """

    def chunk(tops: Tensor, lengths: LongTensor, n_gt: LongTensor, ks: tuple[int, ...]) -> list[Tensor]:
        out = []
        for k, hits in zip(ks, hits_at(tops, ks)):
            denominator = torch.minimum(n_gt, lengths.clamp(max=k)).double()
            out.append(torch.where(denominator > 0, hits / denominator.clamp(min=1), 0.0))
        return out

    return _per_query(gt_tops, n_gts, top_k, verbose, "Precision", chunk)


def calc_map(
    gt_tops: Sequence[BoolTensor], n_gts: Sequence[int], top_k: tuple[int, ...], verbose: bool = False
) -> list[FloatTensor]:
    """Mean Average Precision (MAP) at cutoffs ``top_k``, for every query (OML's definition).

    .. math::
        \\textrm{map}@k = \\frac{1}{n_k} \\sum_{i=1}^{k} \\frac{n_i}{i} \\times \\textrm{rel}(i)

    where :math:`\\textrm{rel}(i)` is 1 if the ``i``-th retrieved item is relevant and
    :math:`n_i = \\sum_{j \\le i} g_j` is the number of relevant items among the first ``i``; the value is
    ``0`` when :math:`n_k = 0`. ``k`` is clipped per query to the number of retrieved items.
    ``n_gt == 0`` with nothing retrieved gives ``1``.

    Args:
        gt_tops: ``gt_tops[i][j]`` is ``True`` if the ``j``-th item retrieved for query ``i`` is relevant.
        n_gts: Number of existing ground truths for every query.
        top_k: Values of ``k`` to calculate ``map@k``.
        verbose: Set ``True`` to see a progress bar.

    Returns:
        One ``[n_queries]`` float tensor of ``map@k`` values per ``k`` in ``top_k``.

    Example:
        >>> gt_tops = [BoolTensor([1, 0]), BoolTensor([0, 1]), BoolTensor([0, 0, 0, 0]), BoolTensor([])]
        >>> calc_map(gt_tops, [1, 1, 2, 0], top_k=(1, 2))
        [tensor([1., 0., 0., 1.]), tensor([1.0000, 0.5000, 0.0000, 1.0000])]
    """

    def chunk(tops: Tensor, lengths: LongTensor, n_gt: LongTensor, ks: tuple[int, ...]) -> list[Tensor]:
        precision_sum = precision_at_hits_cumsum(tops)
        out = []
        for k, n_k in zip(ks, hits_at(tops, ks)):
            out.append(torch.where(n_k > 0, _value_at(precision_sum, k) / n_k.clamp(min=1), 0.0))
        return out

    return _per_query(gt_tops, n_gts, top_k, verbose, "MAP", chunk)


def _isin_sorted(elements: Tensor, sorted_test: Tensor) -> Tensor:
    """``torch.isin(elements, sorted_test)`` by binary search in the sorted ``sorted_test`` (fast on CPU)."""
    if sorted_test.numel() == 0:
        return torch.zeros_like(elements, dtype=torch.bool)
    position = torch.searchsorted(sorted_test, elements).clamp_(max=sorted_test.numel() - 1)
    return sorted_test[position] == elements


def calc_gt_tops(
    retrieved_ids: Sequence[LongTensor], gt_ids: Sequence[LongTensor], max_k: int | None = None
) -> Ragged:
    """Mark every retrieved item as relevant or not: ``gt_tops[i][j] = retrieved_ids[i][j] in gt_ids[i]``.

    Only the first ``max_k`` retrieved items of every query are kept (all when ``None``). Vectorised per chunk
    of queries with one membership test (binary search) on ``query * base + id`` keys.

    Returns:
        A :class:`~oml_core.utils.ragged.Ragged` of ``n_queries`` 1-D bool tensors of lengths
        ``min(len(retrieved_ids[i]), max_k)``.

    Raises:
        ValueError: inputs of different lengths, or a negative id.
    """
    if len(retrieved_ids) != len(gt_ids):
        raise ValueError(
            f"retrieved_ids and gt_ids must have one entry per query, got {len(retrieved_ids)}, {len(gt_ids)}"
        )
    retrieved_all = Ragged.from_tensors(retrieved_ids, torch.long)
    gt_all = Ragged.from_tensors(gt_ids, torch.long)
    if max_k is not None:
        retrieved_all = retrieved_all.truncate(retrieved_all.lengths.clamp(max=max_k))
    tops_parts: list[Tensor] = []
    for sl in iter_chunks(len(retrieved_all), METRICS_CHUNK_SIZE):
        retrieved, gt = retrieved_all[sl], gt_all[sl]
        r_flat, g_flat = retrieved.values, gt.values.to(retrieved.values.device)
        if (r_flat.numel() and int(r_flat.min()) < 0) or (g_flat.numel() and int(g_flat.min()) < 0):
            raise ValueError("retrieved_ids and gt_ids must be non-negative gallery positions")
        base = int(max(r_flat.max() if r_flat.numel() else 0, g_flat.max() if g_flat.numel() else 0)) + 1
        r_keys = retrieved.row_ids() * base + r_flat
        g_keys = gt.row_ids().to(g_flat.device) * base + g_flat
        tops_parts.append(_isin_sorted(r_keys, torch.sort(g_keys).values).cpu())
    flat = torch.cat(tops_parts) if tops_parts else torch.zeros(0, dtype=torch.bool)
    return Ragged(flat, retrieved_all.lengths)


# -------------------------------------------------------------------------------- metric dictionaries
def requested_top_k(
    cmc_top_k: Sequence[int] | None = (5,),
    precision_top_k: Sequence[int] | None = (5,),
    map_top_k: Sequence[int] | None = (5,),
    **other_top_k: Sequence[int] | None,
) -> dict[str, tuple[int, ...]]:
    """``{metric_name: top_k}`` for every non-empty ``<name>_top_k`` argument, in the order given.

    Raises:
        TypeError: a keyword argument that does not end with ``_top_k``.
        ValueError: a ``top_k`` that is not a sequence of positive integers.
    """
    requested: dict[str, tuple[int, ...]] = {}
    given = {
        "cmc_top_k": cmc_top_k,
        "precision_top_k": precision_top_k,
        "map_top_k": map_top_k,
        **other_top_k,
    }
    for key, top_k in given.items():
        name = key[: -len(TOP_K_SUFFIX)]
        if not key.endswith(TOP_K_SUFFIX) or not name:
            raise TypeError(
                f"unexpected keyword argument {key!r}: extra retrieval metrics are requested as "
                f"'<metric name>{TOP_K_SUFFIX}=(k1, k2, ...)'"
            )
        try:
            values = () if top_k is None else tuple(top_k)
        except TypeError:
            raise ValueError(f"{key} must be a sequence of positive integers, got {top_k!r}") from None
        if values:
            requested[name] = check_top_k(values, key)
    return requested


def _as_categories(categories: TCategories, n: int, name: str) -> np.ndarray:
    arr = categories.detach().cpu().numpy() if isinstance(categories, Tensor) else np.asarray(categories)
    if arr.ndim != 1 or len(arr) != n:
        raise ValueError(f"{name} must have one entry per item ({n}), got shape {arr.shape}")
    return arr


def unique_categories(categories: np.ndarray) -> list[Any]:
    """The distinct categories, sorted (order of appearance when they cannot be sorted), as Python scalars.

    Raises ``ValueError`` if one of them is the reserved key :data:`OVERALL_CATEGORIES_KEY`.
    """
    try:
        unique = list(np.unique(categories))
    except TypeError:  # mixed types cannot be sorted: keep the order of appearance
        unique = list(dict.fromkeys(categories.tolist()))
    keys = [c.item() if isinstance(c, np.generic) else c for c in unique]
    if OVERALL_CATEGORIES_KEY in keys:
        raise ValueError(
            f"a category may not be called {OVERALL_CATEGORIES_KEY!r}, the key of the overall metrics"
        )
    return keys


def take_unreduced_metrics_by_mask(metrics: TMetricsDict, mask: Tensor | np.ndarray) -> TMetricsDict:
    """Keep only the queries selected by the bool ``mask`` in every per-query tensor of a nested metrics dict.

    Tensors whose first dimension is not ``len(mask)`` (scalars such as ``pcf``) and numbers are kept.
    """
    mask_t = torch.as_tensor(mask, dtype=torch.bool)
    output: TMetricsDict = {}
    for key, value in metrics.items():
        if isinstance(value, Tensor) and value.ndim >= 1 and value.shape[0] == len(mask_t):
            output[key] = value[mask_t.to(value.device)]
        elif isinstance(value, Mapping):
            output[key] = take_unreduced_metrics_by_mask(dict(value), mask_t)
        else:
            output[key] = value
    return output


def split_metrics_by_categories(metrics: TMetricsDict, categories: TCategories) -> TMetricsDict:
    """``{"OVERALL": metrics, category: metrics of its queries, ...}`` from per-query metrics.

    Categories are sorted (``np.unique``); numpy scalars become python values (``1``, ``"shoes"``).
    """
    n = _n_queries_of(metrics)
    cats = _as_categories(categories, n if n is not None else len(categories), "query_categories")
    output: TMetricsDict = {OVERALL_CATEGORIES_KEY: metrics}
    for category in unique_categories(cats):
        output[category] = take_unreduced_metrics_by_mask(metrics, cats == category)
    return output


def _n_queries_of(metrics: TMetricsDict) -> int | None:
    for value in metrics.values():
        if isinstance(value, Tensor) and value.ndim == 1:
            return len(value)
        if isinstance(value, Mapping):
            n = _n_queries_of(dict(value))
            if n is not None:
                return n
    return None


def reduce_metrics(metrics_to_reduce: TMetricsDict) -> TMetricsDict:
    """Average every per-query tensor of a nested metrics dict; numbers are kept.

    The average is ``nanmean``: a query whose value is ``nan`` (a query the metric skips, such as fall-out
    with ``empty_target_action="skip"``) is left out, and a tensor of ``nan`` only reduces to ``nan``.
    """
    output: TMetricsDict = {}
    for key, value in metrics_to_reduce.items():
        if isinstance(value, Tensor):
            output[key] = value.float().nanmean()
        elif isinstance(value, np.ndarray):
            output[key] = torch.as_tensor(value, dtype=torch.float32).nanmean()
        elif isinstance(value, Mapping):
            output[key] = reduce_metrics(dict(value))
        else:
            output[key] = value
    return output


def check_n_gallery(n_gallery: int | Sequence[int] | Tensor, n_queries: int) -> LongTensor:
    """``n_gallery`` as a ``[n_queries]`` LongTensor on the CPU: an int is broadcast to every query.

    Raises:
        ValueError: a sequence of another length than ``n_queries``, a non-integer or a negative value.
    """
    if isinstance(n_gallery, (int, np.integer)) and not isinstance(n_gallery, bool):
        values = torch.full((n_queries,), int(n_gallery), dtype=torch.long)
    else:
        values = as_long_1d(n_gallery, "n_gallery")  # type: ignore[arg-type]
        if len(values) != n_queries:
            raise ValueError(
                f"n_gallery must be an int or have one entry per query ({n_queries}), got {len(values)} entries"
            )
    if (values < 0).any():
        raise ValueError(f"n_gallery must be non-negative, got {int(values.min())} for a query")
    return values


def _accepted_parameters(fn: Callable[..., Any]) -> tuple[dict[str, inspect.Parameter], bool]:
    """``(named parameters, accepts **kwargs)`` of ``fn``; nothing for a callable without a signature."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}, False
    return dict(params), any(p.kind is p.VAR_KEYWORD for p in params.values())


def accepts_keyword(fn: Callable[..., Any], name: str, by_name_only: bool = False) -> bool:
    """Whether ``fn`` accepts the keyword argument ``name``: by name, or through ``**kwargs`` unless
    ``by_name_only``."""
    params, var_keyword = _accepted_parameters(fn)
    return name in params or (var_keyword and not by_name_only)


def call_retrieval_metric(
    name: str,
    fn: Callable[..., Any],
    gt_tops: Sequence[BoolTensor],
    n_gts: Sequence[int] | Tensor,
    top_k: tuple[int, ...],
    context: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> list[Tensor]:
    """Call a retrieval metric with the module's calling convention and check what it returns.

    ``fn(gt_tops, n_gts, top_k, **accepted_context, **kwargs)``: a context keyword (``verbose``,
    ``n_gallery``) is passed only if ``fn`` accepts it and its value is not ``None``; ``kwargs`` are the
    metric's own options, always passed.

    Raises:
        ValueError: ``fn`` needs a context keyword (no default) whose value is ``None``, or it does not
            return one ``[n_queries]`` tensor per ``k``.
    """
    params, var_keyword = _accepted_parameters(fn)
    passed: dict[str, Any] = {}
    for key, value in (context or {}).items():
        if value is not None and (var_keyword or key in params):
            passed[key] = value
        elif value is None and key in params and params[key].default is inspect.Parameter.empty:
            raise ValueError(
                f"retrieval metric {name!r} needs {key}: pass {key}=... to calc_retrieval_metrics "
                f"(see its docstring)"
            )
    values = [torch.as_tensor(v) for v in fn(gt_tops, n_gts, top_k, **passed, **kwargs)]
    if len(values) != len(top_k) or any(tuple(v.shape) != (len(gt_tops),) for v in values):
        shapes = [tuple(v.shape) for v in values]
        raise ValueError(
            f"retrieval metric {name!r} must return a [n_queries]=[{len(gt_tops)}] tensor per k in {top_k}, "
            f"got shapes {shapes}"
        )
    return values


def calc_retrieval_metrics(
    retrieved_ids: Sequence[LongTensor],
    gt_ids: Sequence[LongTensor],
    query_categories: TCategories | None = None,
    cmc_top_k: tuple[int, ...] = (5,),
    precision_top_k: tuple[int, ...] = (5,),
    map_top_k: tuple[int, ...] = (5,),
    reduce: bool = True,
    verbose: bool = True,
    registry: Registry | None = None,
    n_gallery: int | Sequence[int] | Tensor | None = None,
    metric_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    **other_top_k: tuple[int, ...],
) -> TMetricsDict:
    """Compute retrieval metrics from ragged retrieval results.

    Every metric ``<name>`` with a non-empty ``<name>_top_k`` is computed by the function registered under
    that name (kind ``retrieval_metric``) in ``registry`` (``default_registry()`` when ``None``): ``cmc``,
    ``precision`` and ``map`` (OML's), ``recall``, ``mrr``, ``ndcg``, ``precision_classic``, ``fallout`` and
    ``map_r`` (see :mod:`oml_core.functional.ranking_metrics`) are the core's built-ins; a plugin's metric
    ``foo`` is computed with ``foo_top_k=(1, 5)``. Each is called with the module's calling convention,
    ``fn(gt_tops, n_gts, top_k, **context)``, where ``gt_tops[i] = isin(retrieved_ids[i][:max_k],
    gt_ids[i])`` (``max_k``: the largest ``k`` asked for any metric), ``n_gts[i] = len(gt_ids[i])`` and the
    context holds ``verbose`` and ``n_gallery`` for the functions that accept them.

    Args:
        retrieved_ids: First gallery indices retrieved for every query (closest first): ``n_query`` tensors.
            Every index is within the range ``(0, n_gallery - 1)``.
        gt_ids: Gallery indices relevant to every query, ``n_query`` 1-D tensors.
        query_categories: Categories of the ``n_query`` queries, to also compute metrics per category.
        cmc_top_k: Values of ``k`` to calculate ``cmc@k`` (Cumulative Matching Characteristic).
        precision_top_k: Values of ``k`` to calculate ``precision@k``.
        map_top_k: Values of ``k`` to calculate ``map@k`` (Mean Average Precision).
        reduce: If ``False`` return the metrics of every query without averaging.
        verbose: Set ``True`` to see progress bars.
        registry: Where the metric functions are looked up.
        n_gallery: Number of gallery items each query could have retrieved: an int (the gallery size) is
            broadcast to every query; give one value per query when queries ignore themselves or the items of
            their sequence. Needed by ``fallout``; passed as a ``[n_query]`` LongTensor to the metrics that
            accept ``n_gallery``.
        metric_kwargs: Options of given metrics, e.g. ``{"fallout": {"empty_target_action": "skip"}}``.
        other_top_k: ``<name>_top_k`` values of registered metrics other than the three above.

    Returns:
        ``{"cmc": {1: value, 5: value}, "precision": {...}, "map": {...}, ...}`` with 0-d tensors (the
        ``nanmean`` over queries, see :func:`reduce_metrics`) when ``reduce`` else ``[n_query]`` tensors.
        With ``query_categories`` the output is ``{"OVERALL": <that dict>, category1: <that dict for its
        queries>, ...}``.

    Raises:
        UnknownNameError: a ``<name>_top_k`` whose metric no plugin registers (from the registry).
        TypeError: a keyword argument that is not ``<name>_top_k``.
        ValueError: no metric requested, a bad ``top_k``, inputs of different lengths, a bad ``n_gallery``,
            ``metric_kwargs`` for a metric not requested, or a metric that needs ``n_gallery`` without it.
    """
    requested = requested_top_k(cmc_top_k, precision_top_k, map_top_k, **other_top_k)
    if not requested:
        raise ValueError("You must specify arguments for at least 1 metric to calculate it")
    if len(retrieved_ids) != len(gt_ids):
        raise ValueError(
            f"retrieved_ids and gt_ids must have one entry per query, got {len(retrieved_ids)}, {len(gt_ids)}"
        )
    if query_categories is not None:
        query_categories = _as_categories(query_categories, len(retrieved_ids), "query_categories")
    options = dict(metric_kwargs or {})
    if set(options) - set(requested):
        raise ValueError(
            f"metric_kwargs given for metrics that are not requested: {sorted(set(options) - set(requested))}; "
            f"requested: {list(requested)}"
        )
    context = {
        "verbose": verbose,
        "n_gallery": None if n_gallery is None else check_n_gallery(n_gallery, len(retrieved_ids)),
    }

    if registry is None:
        from oml_core.registry import default_registry

        registry = default_registry()
    functions = {name: registry.get(RETRIEVAL_METRIC_KIND, name).load() for name in requested}

    max_k = max(k for top_k in requested.values() for k in top_k)
    gt_ids = Ragged.from_tensors(gt_ids, torch.long)
    gt_tops = calc_gt_tops(retrieved_ids, gt_ids, max_k=max_k)
    n_gts = gt_ids.lengths

    metrics: TMetricsDict = {}
    for name, top_k in requested.items():
        values = call_retrieval_metric(
            name, functions[name], gt_tops, n_gts, top_k, context, **options.get(name, {})
        )
        metrics[name] = dict(zip(top_k, values))

    if query_categories is not None:
        metrics = split_metrics_by_categories(metrics, query_categories)
    if reduce:
        metrics = reduce_metrics(metrics)
    return metrics


# -------------------------------------------------------------------------------- topological metrics
def _explained_variances(embeddings: Tensor) -> Tensor:
    """Eigenvalues of ``Xc^T Xc`` (``Xc``: centred embeddings), descending, the first ``min(n, d)`` of them.

    These are the squared singular values of ``Xc`` (what an SVD-based PCA gives), accumulated in float64 over
    chunks of rows so that no centred copy of the whole matrix is made.
    """
    n, d = embeddings.shape
    x = embeddings.detach()
    mean = x.sum(dim=0, dtype=torch.float64) / n
    scatter = torch.zeros(d, d, dtype=torch.float64, device=x.device)
    for sl in iter_chunks(n, PCF_CHUNK_SIZE):
        centred = x[sl].double() - mean
        scatter += centred.T @ centred
    if not torch.isfinite(scatter).all():
        return torch.full((min(n, d),), float("nan"), dtype=torch.float64)
    eigenvalues = torch.linalg.eigvalsh(scatter.cpu()).flip(0).clamp(min=0)
    return eigenvalues[: min(n, d)]


def calc_pcf(embeddings: Tensor, pcf_variance: Sequence[float]) -> FloatTensor:
    """Principal Components Fraction: the fraction of principal axes needed to explain a share of variance.

    With :math:`\\lambda_1 \\ge \\ldots \\ge \\lambda_m` the variances along the principal axes of the
    ``[n, d]`` embeddings (:math:`m = \\min(n, d)`, as an SVD of the centred data gives), the number of
    components for an explained variance :math:`r` is the largest :math:`p \\le d` such that

    .. math::
        \\frac{\\sum_{i=1}^{p-1} \\lambda_i}{\\sum_{i=1}^{m} \\lambda_i} \\le r

    and the function returns :math:`p / d` for every :math:`r` in ``pcf_variance``. The result is ``nan`` when
    the embeddings have no variance (a single item, or all equal).

    Args:
        embeddings: Embeddings matrix with the shape of ``[n_embeddings, embeddings_dim]``.
        pcf_variance: Values in range ``[0, 1]``.

    Returns:
        ``[len(pcf_variance)]`` float tensor of fractions of the embeddings dimension.

    Example:
        >>> calc_pcf(torch.eye(4, 10, dtype=torch.float), pcf_variance=(0.5, 1))
        tensor([0.2000, 0.5000])
    """
    pcf_variance = _check_in_range(pcf_variance, 0, 1, "pcf_variance")
    if embeddings.ndim != 2 or embeddings.shape[0] == 0 or embeddings.shape[1] == 0:
        raise ValueError(f"embeddings must be a non-empty [n, d] matrix, got shape {tuple(embeddings.shape)}")
    d = embeddings.shape[1]
    eigenvalues = _explained_variances(embeddings)
    cumulative = torch.cumsum(eigenvalues, dim=0)
    total = cumulative[-1]
    if not bool(total > 0):
        return torch.full((len(pcf_variance),), float("nan"))
    ratio_cumsum = (cumulative / total).clamp(max=1.0)
    thresholds = torch.tensor(pcf_variance, dtype=torch.float64)
    n_components = (torch.searchsorted(ratio_cumsum, thresholds, right=True) + 1).clamp(max=d)
    return (n_components.double() / d).float()


def calc_topological_metrics(
    embeddings: Tensor,
    pcf_variance: Sequence[float],
    categories: TCategories | None = None,
    verbose: bool = False,
) -> TMetricsDict:
    """Topological metrics of the embeddings: ``{"pcf": {r: value}}`` (see :func:`calc_pcf`).

    Args:
        embeddings: Embeddings matrix with the shape of ``[n_embeddings, embeddings_dim]``.
        pcf_variance: Values in range ``[0, 1]``; an empty tuple computes nothing (``{}``).
        categories: Categories of the embeddings (``n_embeddings`` of them) to compute metrics per category.
        verbose: Set ``True`` to see a progress bar over categories.

    Returns:
        ``{"pcf": {0.5: 0-d tensor}}``; with ``categories``, ``{"OVERALL": {...}, category1: {...}, ...}``
        where each category's pcf is computed on its own embeddings.
    """
    metrics: TMetricsDict = {}
    if pcf_variance:
        metrics["pcf"] = dict(zip(tuple(pcf_variance), calc_pcf(embeddings, pcf_variance)))
    if categories is None:
        return metrics
    cats = _as_categories(categories, len(embeddings), "categories")
    output: TMetricsDict = {OVERALL_CATEGORIES_KEY: metrics}
    unique = unique_categories(cats)
    for category in tqdm(unique, desc="Topological metrics per category", disable=not verbose):
        mask = torch.as_tensor(cats == category, dtype=torch.bool, device=embeddings.device)
        output[category] = calc_topological_metrics(embeddings[mask], pcf_variance)
    return output


def __getattr__(name: str) -> Any:
    """``calc_fnmr_at_fmr`` lives in :mod:`oml_core.functional.fnmr` (which builds on this module) and is
    importable from here, as in OML: ``from oml_core.functional.metrics import calc_fnmr_at_fmr``."""
    if name == "calc_fnmr_at_fmr":
        from oml_core.functional.fnmr import calc_fnmr_at_fmr

        return calc_fnmr_at_fmr
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "METRICS_CHUNK_SIZE",
    "OVERALL_CATEGORIES_KEY",
    "RETRIEVAL_METRIC_KIND",
    "TCategories",
    "TMetricsDict",
    "accepts_keyword",
    "as_long_1d",
    "calc_cmc",
    "calc_fnmr_at_fmr",  # noqa: F822 (module __getattr__, see above)
    "calc_gt_tops",
    "calc_map",
    "calc_pcf",
    "calc_precision",
    "calc_retrieval_metrics",
    "calc_topological_metrics",
    "call_retrieval_metric",
    "cat_ragged",
    "check_n_gallery",
    "check_top_k",
    "hits_at",
    "pad_ragged",
    "precision_at_hits_cumsum",
    "reduce_metrics",
    "requested_top_k",
    "split_metrics_by_categories",
    "take_unreduced_metrics_by_mask",
    "unique_categories",
]
