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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import BoolTensor, Tensor  # noqa: F401  (BoolTensor: used by the doctest examples)
from tqdm.auto import tqdm

from oml_core.const import TOP_K_SUFFIX
from oml_core.functional.fnmr import calc_fnmr_at_fmr
from oml_core.functional.ragged_tops import (
    METRICS_CHUNK_SIZE,
    RetrievedIdsNotUniqueError,
    TMetricsDict,
    calc_gt_tops,
    cat_ragged,
    hits_at,
    pad_ragged,
    per_query,
    precision_at_hits_cumsum,
    value_at,
)
from oml_core.utils.checks import as_int_tensor, check_n_gallery, check_top_k
from oml_core.utils.pca import explained_variances, principal_axes_number
from oml_core.utils.ragged import Ragged

#: The check of ``n_gts`` and ``n_gallery`` sequences (:func:`~oml_core.utils.checks.as_int_tensor`).
as_long_1d = as_int_tensor

if TYPE_CHECKING:
    from oml_core.registry import Registry

TCategories = Tensor | np.ndarray | Sequence[Any]

#: The key of the metrics computed over all the queries (OML's).
OVERALL_CATEGORIES_KEY = "OVERALL"
#: Kind of the registry entries computed by :func:`calc_retrieval_metrics`.
RETRIEVAL_METRIC_KIND = "retrieval_metric"


# ------------------------------------------------------------------------------------ retrieval metrics
def calc_cmc(
    gt_tops: Sequence[Tensor], n_gts: Sequence[int] | Tensor, top_k: tuple[int, ...], verbose: bool = False
) -> list[Tensor]:
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

    def chunk(tops: Tensor, lengths: Tensor, n_gt: Tensor, ks: tuple[int, ...]) -> list[Tensor]:
        return [(hits > 0).double() for hits in hits_at(tops, ks)]

    return per_query(gt_tops, n_gts, top_k, verbose, "CMC", chunk)


def calc_precision(
    gt_tops: Sequence[Tensor], n_gts: Sequence[int] | Tensor, top_k: tuple[int, ...], verbose: bool = False
) -> list[Tensor]:
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

    def chunk(tops: Tensor, lengths: Tensor, n_gt: Tensor, ks: tuple[int, ...]) -> list[Tensor]:
        out = []
        for k, hits in zip(ks, hits_at(tops, ks)):
            denominator = torch.minimum(n_gt, lengths.clamp(max=k)).double()
            out.append(torch.where(denominator > 0, hits / denominator.clamp(min=1), 0.0))
        return out

    return per_query(gt_tops, n_gts, top_k, verbose, "Precision", chunk)


def calc_map(
    gt_tops: Sequence[Tensor], n_gts: Sequence[int] | Tensor, top_k: tuple[int, ...], verbose: bool = False
) -> list[Tensor]:
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

    def chunk(tops: Tensor, lengths: Tensor, n_gt: Tensor, ks: tuple[int, ...]) -> list[Tensor]:
        precision_sum = precision_at_hits_cumsum(tops)
        out = []
        for k, n_k in zip(ks, hits_at(tops, ks)):
            out.append(torch.where(n_k > 0, value_at(precision_sum, k) / n_k.clamp(min=1), 0.0))
        return out

    return per_query(gt_tops, n_gts, top_k, verbose, "MAP", chunk)


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
    gt_tops: Sequence[Tensor],
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
    retrieved_ids: Sequence[Tensor],
    gt_ids: Sequence[Tensor],
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
        RetrievedIdsNotUniqueError: a query retrieves an id twice among its first ``max_k`` (a ``RuntimeError``
            as OML's "Retrieved ids must be unique", and a ``ValueError``); the message names the query and the id.
        TypeError: a keyword argument that is not ``<name>_top_k``.
        ValueError: no metric requested, a bad ``top_k``, inputs of different lengths, a ground truth listing an
            id twice, a bad ``n_gallery``, ``metric_kwargs`` for a metric not requested, or a metric that needs
            ``n_gallery`` without it.
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
def calc_pcf(embeddings: Tensor, pcf_variance: Sequence[float]) -> Tensor:
    """Principal Components Fraction: the fraction of principal axes needed to explain a share of variance.

    With :math:`\\lambda_1 \\ge \\ldots \\ge \\lambda_m` the variances along the principal axes of the
    ``[n, d]`` embeddings (:math:`m = \\min(n, d)`, as an SVD of the centred data gives), the number of
    components for an explained variance :math:`r` is the largest :math:`p \\le d` such that

    .. math::
        \\frac{\\sum_{i=1}^{p-1} \\lambda_i}{\\sum_{i=1}^{m} \\lambda_i} \\le r

    and the function returns :math:`p / d` for every :math:`r` in ``pcf_variance`` (OML's manual). The variances
    are the eigenvalues of a ``min(n, d)``-sized symmetric matrix (:func:`~oml_core.utils.pca.explained_variances`:
    the Gram matrix when ``n < d``), so 64 embeddings of dimension 4096 cost a ``64 x 64`` eigenproblem. The number of
    axes is computed by :func:`~oml_core.utils.pca.principal_axes_number`, as
    :meth:`~oml_core.utils.pca.PCA.calc_principal_axes_number` computes it. Where the two used to differ:

    - without variance (a single item, all equal, or embeddings that are not finite) the ratio is ``0 / 0``:
      this metric is ``nan`` (one degenerate category does not abort an evaluation; the PCA method raises);
    - ``pcf_variance`` is checked by :func:`~oml_core.utils.checks.check_in_range`, as the manual's "values in
      range [0, 1]": an empty sequence, a value outside ``[0, 1]`` and a ``bool`` (``True`` is not a
      fraction) are a ``ValueError``.

    Args:
        embeddings: Embeddings matrix with the shape of ``[n_embeddings, embeddings_dim]``.
        pcf_variance: Values in range ``[0, 1]``.

    Returns:
        ``[len(pcf_variance)]`` float tensor of fractions of the embeddings dimension.

    Example:
        >>> calc_pcf(torch.eye(4, 10, dtype=torch.float), pcf_variance=(0.5, 1))
        tensor([0.2000, 0.5000])
    """
    n_axes = principal_axes_number(explained_variances(embeddings), pcf_variance, embeddings.shape[1])
    if n_axes is None:
        return torch.full((len(pcf_variance),), float("nan"))
    return (n_axes.double() / embeddings.shape[1]).float()


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


__all__ = [
    "METRICS_CHUNK_SIZE",
    "OVERALL_CATEGORIES_KEY",
    "RETRIEVAL_METRIC_KIND",
    "RetrievedIdsNotUniqueError",
    "TCategories",
    "TMetricsDict",
    "accepts_keyword",
    "as_long_1d",
    "calc_cmc",
    "calc_fnmr_at_fmr",
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
