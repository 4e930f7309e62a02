"""``EmbeddingMetrics``: accumulate the embeddings of a validation epoch, then compute retrieval metrics."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence, Sized
from copy import deepcopy
from pprint import pformat
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import Tensor

from oml_core.ddp.utils import comm_device, is_main_process
from oml_core.functional.fnmr import calc_fnmr_at_fmr_all_pairs, calc_fnmr_at_fmr_rr
from oml_core.functional.metrics import (
    OVERALL_CATEGORIES_KEY,
    RETRIEVAL_METRIC_KIND,
    TCategories,
    TMetricsDict,
    calc_retrieval_metrics,
    calc_topological_metrics,
    reduce_metrics,
    requested_top_k,
    take_unreduced_metrics_by_mask,
    unique_categories,
)
from oml_core.interfaces.datasets import IQueryGalleryLabeledDataset
from oml_core.interfaces.metrics import IMetricDDP, IMetricVisualisable
from oml_core.interfaces.retrieval import IDistancesPostprocessor, IRetrievalPostprocessor
from oml_core.knn.distances import get_distance_fn
from oml_core.knn.search import KnnResult
from oml_core.metrics.accumulation import INDICES_KEY, Accumulator
from oml_core.retrieval.retrieval_results import (
    RetrievalResults,
    dataset_column,
    factorize,
    get_query_gallery_ids,
    get_sequence_ids,
    labels_of,
)
from oml_core.utils.checks import check_in_range
from oml_core.utils.logs import get_logger

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from oml_core.registry import Registry

logger = get_logger(__name__)

#: Columns (or ``extra_data`` keys) of a dataset holding the category of every item (OML's is ``category``).
CATEGORIES_COLUMNS = ("category", "categories")
#: How :class:`EmbeddingMetrics` names its dataset in error messages.
VALIDATION_SPLIT = "the validation split"


def check_ground_truth(rr: RetrievalResults, what: str = "these retrieval results") -> None:
    """Check that retrieval metrics of ``rr`` are defined: it has ground truth, queries, and at least one query
    with a relevant gallery item.

    A query without any relevant gallery item among others is fine: the metrics score it by their documented
    rules (:mod:`oml_core.functional.metrics`: ``1`` when nothing is retrieved either, else ``0``). Only when
    no query has one is every metric undefined, and this is an error rather than a table of meaningless
    numbers.

    Args:
        rr: Retrieval results.
        what: How the error messages name the results (``"the validation split"``).

    Raises:
        ValueError: ``rr.gt_ids`` is ``None``, ``rr`` has no queries, or no query has a relevant gallery item;
            the message names ``what``.
    """
    if rr.gt_ids is None:
        raise ValueError(f"retrieval metrics need ground truth, but there is none in {what} (gt_ids=None)")
    if rr.n_queries == 0:
        raise ValueError(f"there are no queries in {what}: every retrieval metric would be undefined")
    if not bool(rr.gt_ids.lengths.any()):
        raise ValueError(
            f"none of the {rr.n_queries} queries in {what} has a ground truth (a gallery item of its label, "
            "other than itself and the items of its sequence): every retrieval metric would be undefined"
        )


def calc_retrieval_metrics_rr(
    rr: RetrievalResults,
    query_categories: TCategories | None = None,
    cmc_top_k: tuple[int, ...] = (5,),
    precision_top_k: tuple[int, ...] = (5,),
    map_top_k: tuple[int, ...] = (5,),
    reduce: bool = True,
    verbose: bool = True,
    registry: Registry | None = None,
    metric_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    **other_top_k: tuple[int, ...],
) -> TMetricsDict:
    """Retrieval metrics of ``RetrievalResults``: :func:`~oml_core.functional.metrics.calc_retrieval_metrics`
    on ``rr.retrieved_ids`` and ``rr.gt_ids``, with ``n_gallery=rr.n_gallery`` (so that ``fallout_top_k``
    works on results built from embeddings).

    Args:
        rr: Retrieval results with ground truth.
        query_categories: Categories of the queries, to also compute metrics per category.
        cmc_top_k: Values of ``k`` to calculate ``cmc@k``.
        precision_top_k: Values of ``k`` to calculate ``precision@k``.
        map_top_k: Values of ``k`` to calculate ``map@k``.
        reduce: If ``False`` return the metrics of every query without averaging.
        verbose: Set ``True`` to see progress bars.
        registry: Where the metric functions are looked up (``default_registry()`` when ``None``).
        metric_kwargs: Options of given metrics, e.g. ``{"fallout": {"empty_target_action": "skip"}}``.
        knn_backend: The kNN backend retrieval searches through (kind ``knn_backend``): a name or a
            ``{name, args}`` spec, built anew for every :meth:`compute_metrics`; ``None``: the exact blockwise
            search. In a pipeline config: ``metric_args.knn_backend``.
        other_top_k: ``<name>_top_k`` values of other registered retrieval metrics (``recall_top_k=(1, 5)``).

    Returns:
        ``{"cmc": {k: value}, "precision": {...}, "map": {...}, ...}`` (0-d tensors when ``reduce``, else
        ``[n_query]`` tensors); with ``query_categories``, ``{"OVERALL": {...}, category: {...}, ...}``.

    Raises:
        ValueError: ``rr`` has no ground truth, no queries, or no query with a relevant gallery item
            (:func:`check_ground_truth`: every metric would be undefined); see ``calc_retrieval_metrics``.
    """
    check_ground_truth(rr)
    assert rr.gt_ids is not None  # check_ground_truth raised otherwise
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
        n_gallery=rr.n_gallery,
        metric_kwargs=metric_kwargs,
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


#: Number of worst queries drawn per metric by :meth:`EmbeddingMetrics.visualize` (OML's).
LOG_TOPK_ROWS_PER_METRIC = 5
#: Number of retrieved items drawn per query by :meth:`EmbeddingMetrics.visualize` (OML's).
LOG_TOPK_IMAGES_PER_ROW = 5
#: Number of ground-truth items drawn per query after the retrieved ones (OML's).
N_GT_SHOW_EMBEDDING_METRICS = 2
#: Metrics that have no per-query values and are never visualised.
NOT_PER_QUERY_METRICS = ("fnmr@fmr", "pcf")
#: The key of the embeddings in :attr:`EmbeddingMetrics.acc` (OML's).
EMBEDDINGS_ACC_KEY = "__embeddings"
#: The key of the embeddings in the dicts given to :meth:`EmbeddingMetrics.update_data` (OML's ``EMBEDDINGS_KEY``).
EMBEDDINGS_KEY = "embeddings"


def flatten_unreduced(metrics: Mapping[Any, Any], sep: str = "/") -> dict[str, Tensor]:
    """Flatten nested per-query metrics into ``{"OVERALL/cmc/1": tensor([...]), ...}`` (tensors kept)."""
    flat: dict[str, Tensor] = {}
    for key, value in metrics.items():
        if isinstance(value, Mapping):
            for sub_key, sub_value in flatten_unreduced(value, sep).items():
                flat[f"{key}{sep}{sub_key}"] = sub_value
        else:
            flat[str(key)] = torch.as_tensor(value)
    return flat


class EmbeddingMetrics(IMetricDDP, IMetricVisualisable):
    """Accumulates the embeddings of a dataset batch by batch, then computes retrieval and topological
    metrics.

    Retrieval metrics are not additive, so they are computed once all the embeddings have been collected:
    :meth:`compute_metrics` retrieves the closest gallery items of every query
    (:meth:`RetrievalResults.from_embeddings`, in memory-bounded chunks: never the whole distance matrix),
    lets the ``postprocessor`` re-rank them, and evaluates every metric ``<name>`` with a ``<name>_top_k``
    (looked up in the registry, kind ``retrieval_metric``: ``cmc``, ``precision``, ``map``, ``recall``,
    ``ndcg``, ... or a plugin's), per query category too when the dataset has categories; plus
    ``fnmr@fmr`` over ALL the query-gallery pairs (exact, in bounded memory; on the embedding distances, before
    any post-processing; under ``OVERALL`` only, as OML, unless ``fnmr_per_category``) and ``pcf``
    (:func:`~oml_core.functional.metrics.calc_pcf`).

    The embeddings are collected by an :class:`~oml_core.metrics.accumulation.Accumulator` (:attr:`acc`), with
    their dataset indices: in any order, an index given twice counts once (the last embedding given for it).
    **DDP**: it works as it is in several processes (``torch.distributed``), as OML's: every process collects
    the embeddings of its share of the dataset (``setup()`` without arguments, or with the number of samples
    the process will see), and :meth:`compute_metrics` first gathers the shares of all the processes
    (:meth:`sync`), so every process computes the metrics over the whole dataset; every process must call it.
    Items that DDP samplers repeat to pad the last batches count once.

    Args:
        dataset: Annotated dataset having a query/gallery split.
        cmc_top_k: Values of ``k`` to calculate ``cmc@k`` (Cumulative Matching Characteristic).
        precision_top_k: Values of ``k`` to calculate ``precision@k``.
        map_top_k: Values of ``k`` to calculate ``map@k`` (Mean Average Precision).
        fmr_vals: Values of ``fmr`` (quantiles in ``[0, 1]``) to calculate ``fnmr@fmr`` (False Non Match Rate at
            the given False Match Rate); ``()`` (the default) skips it, since it costs a pass over all pairs.
        pcf_variance: Values in range ``[0, 1]`` to calculate the Principal Components Fraction for.
        postprocessor: Post-processor applied to the retrieval results before the metrics (re-ranking); when it
            has a ``top_n``, at least that many items are retrieved. An ``IRetrievalPostprocessor`` (such as
            ``PairwiseReranker``): a distance-matrix ``IDistancesPostprocessor`` is refused (``TypeError``).
        metrics_to_exclude_from_visualization: Names of the metrics not to visualise (a metric name such as
            ``"cmc"`` or a full key such as ``"OVERALL/cmc/1"``); does not affect calculations.
        return_only_overall_category: Set ``True`` to return only the metrics over all the queries.
        visualize_only_overall_category: Set ``False`` to also visualise every category separately.
        verbose: Set ``True`` to log the metrics (``INFO``, :mod:`oml_core.utils.logs`; main process only).
        distance: ``"l2"`` (OML's) or ``"cosine"`` (``1 - cosine similarity``).
        registry: Where metric functions are looked up (``default_registry()`` when ``None``).
        metric_kwargs: Options of given metrics, e.g. ``{"fallout": {"empty_target_action": "skip"}}``.
        knn_backend: The kNN backend retrieval searches through (kind ``knn_backend``): a name or a
            ``{name, args}`` spec; ``None``: the exact blockwise search.
        fnmr_per_category: Also compute ``fnmr@fmr`` for every category (oml's extension; OML 4.0 reports it
            under ``OVERALL`` only, which is the default).
        other_top_k: ``<name>_top_k`` values of other registered retrieval metrics (``recall_top_k=(1, 5)``,
            ``fallout_top_k=(10,)``: fall-out is given the number of gallery items every query could retrieve).

    After :meth:`compute_metrics`: ``self.retrieval_results``, ``self.metrics`` (reduced, all categories) and
    ``self.metrics_unreduced`` (per-query tensors) are kept.

    Raises:
        UnknownNameError: a ``<name>_top_k`` whose metric no loaded plugin registers.
        TypeError: an argument that is neither known nor ``<name>_top_k``.
        ValueError: ``fmr_vals`` or ``pcf_variance`` outside ``[0, 1]``, an unknown ``distance``, or
            ``metric_kwargs`` for a metric that is not requested.
    """

    def __init__(
        self,
        dataset: IQueryGalleryLabeledDataset,
        cmc_top_k: tuple[int, ...] = (5,),
        precision_top_k: tuple[int, ...] = (5,),
        map_top_k: tuple[int, ...] = (5,),
        fmr_vals: tuple[float, ...] = (),
        pcf_variance: tuple[float, ...] = (0.5,),
        postprocessor: IRetrievalPostprocessor | None = None,
        metrics_to_exclude_from_visualization: Iterable[str] = (),
        return_only_overall_category: bool = False,
        visualize_only_overall_category: bool = True,
        verbose: bool = True,
        distance: str = "l2",
        registry: Registry | None = None,
        metric_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        knn_backend: Mapping[str, Any] | str | None = None,
        fnmr_per_category: bool = False,
        **other_top_k: tuple[int, ...],
    ) -> None:
        self.dataset = dataset
        self.fnmr_per_category = bool(fnmr_per_category)
        self.top_k = requested_top_k(cmc_top_k, precision_top_k, map_top_k, **other_top_k)
        self.cmc_top_k = self.top_k.get("cmc", ())
        self.precision_top_k = self.top_k.get("precision", ())
        self.map_top_k = self.top_k.get("map", ())
        self.fmr_vals = check_in_range(fmr_vals, "fmr_vals") if fmr_vals else ()
        self.pcf_variance = check_in_range(pcf_variance, "pcf_variance") if pcf_variance else ()
        self.postprocessor = _checked_postprocessor(postprocessor)
        self.metrics_to_exclude_from_visualization = (
            *NOT_PER_QUERY_METRICS,
            *metrics_to_exclude_from_visualization,
        )
        self.return_only_overall_category = return_only_overall_category
        self.visualize_only_overall_category = visualize_only_overall_category
        self.verbose = verbose
        get_distance_fn(distance)  # an unknown distance fails now, not after an epoch
        self.distance = distance
        if registry is None:
            from oml_core.registry import default_registry

            registry = default_registry()
        self.registry = registry
        for name in self.top_k:
            registry.get(RETRIEVAL_METRIC_KIND, name)  # an unknown metric fails now, not after an epoch
        self.metric_kwargs = {name: dict(options) for name, options in (metric_kwargs or {}).items()}
        if set(self.metric_kwargs) - set(self.top_k):
            raise ValueError(
                f"metric_kwargs given for metrics that are not requested: "
                f"{sorted(set(self.metric_kwargs) - set(self.top_k))}; requested: {list(self.top_k)}"
            )

        self.knn_backend = knn_backend
        if knn_backend is not None:  # an unknown backend fails now, not after an epoch
            registry.get("knn_backend", knn_backend if isinstance(knn_backend, str) else knn_backend["name"])
        self.retrieval_results: RetrievalResults | None = None
        self.metrics: TMetricsDict | None = None
        self.metrics_unreduced: TMetricsDict | None = None
        self.num_samples: int | None = None
        #: Collects the embeddings (under :data:`EMBEDDINGS_ACC_KEY`) and their dataset indices (OML's).
        self.acc = Accumulator(keys_to_accumulate=(EMBEDDINGS_ACC_KEY,))
        self._synced = False
        self._queries_of_category: dict[Any, Tensor] = {}

    def _dataset_size(self) -> int:
        # cast: the dataset has __len__, which IQueryGalleryLabeledDataset (torch's Dataset) does not declare
        return len(cast(Sized, self.dataset))

    def setup(self, num_samples: int | None = None) -> None:
        """Forget everything collected and computed; expect ``num_samples`` embeddings from this process
        (``len(dataset)``; under DDP a process may see fewer, its share: they are gathered by :meth:`sync`).

        Raises:
            ValueError: the dataset has no queries or no gallery items (before any embedding is collected), or
                ``num_samples`` is not an int >= 1.
        """
        get_query_gallery_ids(self.dataset, VALIDATION_SPLIT)
        self.retrieval_results = None
        self.metrics = None
        self.metrics_unreduced = None
        self.num_samples = self._dataset_size() if num_samples is None else num_samples
        self.acc.refresh(self.num_samples)
        self._synced = False
        self._queries_of_category = {}

    def update(self, embeddings: Tensor, indices: Tensor | Sequence[int]) -> None:
        """Collect the embeddings of one batch with their global dataset indices.

        Args:
            embeddings: ``[batch, dim]`` representations of the dataset items of the batch.
            indices: Global indices of those items within ``(0, len(dataset) - 1)``; any order, and an index
                seen again (DDP pads its last batches with repeated items) counts once: the last embedding
                given for it is kept.

        Raises:
            ValueError: not ``[batch, dim]`` embeddings with one index each, an index out of range, or another
                dim than the earlier batches'.
        """
        indices_t = self._checked_batch(embeddings, indices)
        self.acc.update_data({EMBEDDINGS_ACC_KEY: embeddings.detach()}, indices=indices_t)
        self._synced = False

    def update_data(self, data: Mapping[str, Any], indices: Tensor | Sequence[int]) -> None:
        """OML's form of :meth:`update`: the embeddings are ``data["embeddings"]``."""
        self.update(embeddings=data[EMBEDDINGS_KEY], indices=indices)

    def _checked_batch(self, embeddings: Tensor, indices: Tensor | Sequence[int]) -> Tensor:
        """``indices`` as a CPU tensor, checked against ``embeddings`` and the dataset (set up if needed).

        Raises:
            ValueError: not ``[batch, dim]`` embeddings with one index each, or an index out of range.
        """
        if self.num_samples is None:
            self.setup()
        indices_t = torch.as_tensor(indices, dtype=torch.long).reshape(-1).cpu()
        if embeddings.ndim != 2 or len(embeddings) != len(indices_t):
            raise ValueError(
                f"expected [batch, dim] embeddings with one index each, got {tuple(embeddings.shape)} for "
                f"{len(indices_t)} indices"
            )
        n_items = self._dataset_size()
        if indices_t.numel() and (int(indices_t.min()) < 0 or int(indices_t.max()) >= n_items):
            raise ValueError(f"indices must be within [0, {n_items - 1}], got {indices_t.tolist()[:10]}...")
        return indices_t

    def sync(self) -> None:
        """Gather the embeddings collected by every process into every process (``torch.distributed`` with more
        than one process: every process must call it), each dataset index once, in dataset order; on one
        process only the ordering. :meth:`compute_metrics` calls it; calling it again before another
        :meth:`update` does nothing."""
        if not self._synced:
            self.acc = self.acc.sync(require_full=False, keep="last")
            self._synced = True

    def _n_collected(self) -> int:
        """The number of dataset items collected (by every process, once synced)."""
        return len(self.acc.storage.get(INDICES_KEY, ()))

    @property
    def embeddings(self) -> Tensor | None:
        """The ``[len(dataset), dim]`` embeddings in dataset order, once :meth:`sync` (or :meth:`compute_metrics`)
        has gathered them (``None`` before)."""
        stored = self.acc.storage.get(EMBEDDINGS_ACC_KEY)
        return stored if self._synced and isinstance(stored, Tensor) else None

    def _n_items_to_retrieve(self) -> int:
        max_k = max((k for top_k in self.top_k.values() for k in top_k), default=1)
        top_n = getattr(self.postprocessor, "top_n", None)
        return max(max_k, int(top_n)) if isinstance(top_n, int) else max_k

    def _fnmr_metrics(self, embeddings: Tensor, query_ids: Tensor, gallery_ids: Tensor) -> Tensor:
        return calc_fnmr_at_fmr_all_pairs(
            embeddings=embeddings,
            ids_query=query_ids,
            ids_gallery=gallery_ids,
            labels=factorize(self.dataset.get_labels()),
            fmr_vals=self.fmr_vals,
            sequence_ids=get_sequence_ids(self.dataset),
            distance=self.distance,
        )

    def compute_metrics(self) -> TMetricsDict:
        """Compute the metrics over the collected embeddings.

        Returns:
            ``{"OVERALL": {"cmc": {1: tensor}, "precision": {...}, "map": {...}, "fnmr@fmr": {0.1: tensor},
            "pcf": {0.5: tensor}}, category1: {...}, ...}`` with 0-d tensors; the category entries are present
            when the dataset has categories and ``return_only_overall_category`` is ``False``.

        Float16 and bfloat16 embeddings give the metrics of their float32 values (distances are computed in
        float32).

        Raises:
            ValueError: not every item of the dataset has been collected; the dataset has no queries or no
                gallery items ("the validation split has no queries (is_query is False for every row)"); no
                query has a ground truth in the gallery while retrieval metrics or ``fnmr@fmr`` are asked
                for (:func:`check_ground_truth`); an embedding is not finite (the message names its row).
            ~oml_core.knn.distances.NonFiniteDistanceError: (a ``ValueError``) the embeddings are so large
                that a distance overflows float32; the message names the query and the gallery item.
        """
        if self.num_samples is None:
            raise ValueError(
                "no embeddings were collected: call setup() and update() before compute_metrics()"
            )
        self.sync()  # in every process, also one that collected nothing: the others wait for it
        n_collected, n_items = self._n_collected(), self._dataset_size()
        if n_collected == 0:
            raise ValueError(
                "no embeddings were collected: call setup() and update() before compute_metrics()"
            )
        if n_collected != n_items:
            raise ValueError(
                f"Metrics have to be calculated on fully collected data: collected {n_collected} out of "
                f"{n_items} samples."
            )
        # None only with EmbeddingMetricsDDP(shard_gallery=True), which refuses fnmr@fmr and pcf (their users)
        embeddings = self.embeddings
        query_ids, gallery_ids = get_query_gallery_ids(self.dataset, VALIDATION_SPLIT)
        rr = self._retrieve()
        if self.top_k or self.fmr_vals:
            check_ground_truth(rr, VALIDATION_SPLIT)
        if self.postprocessor is not None:
            rr = self.postprocessor.process(rr, self.dataset)
        self.retrieval_results = rr

        categories = get_categories(self.dataset)
        query_categories = None if categories is None else categories[query_ids.numpy()]
        self._queries_of_category = {OVERALL_CATEGORIES_KEY: torch.arange(len(query_ids))}
        if query_categories is not None:
            for category in unique_categories(query_categories):
                self._queries_of_category[category] = torch.as_tensor(
                    np.flatnonzero(query_categories == category), dtype=torch.long
                )

        unreduced: TMetricsDict = {key: {} for key in self._queries_of_category}
        if self.top_k:
            top_k_kwargs: dict[str, tuple[int, ...]] = {
                "cmc_top_k": (),
                "precision_top_k": (),
                "map_top_k": (),
            }
            top_k_kwargs.update({f"{name}_top_k": top_k for name, top_k in self.top_k.items()})
            metrics_r = calc_retrieval_metrics_rr(
                rr,
                reduce=False,
                verbose=False,
                registry=self.registry,
                metric_kwargs=self.metric_kwargs,
                **top_k_kwargs,
            )
            for key, positions in self._queries_of_category.items():
                unreduced[key].update(take_unreduced_metrics_by_mask(metrics_r, _mask(positions, len(rr))))
        if self.fmr_vals:
            assert embeddings is not None  # see above
            for key in self._fnmr_groups():
                positions = self._queries_of_category[key]
                values = self._fnmr_metrics(embeddings, query_ids[positions], gallery_ids)
                unreduced[key]["fnmr@fmr"] = dict(zip(self.fmr_vals, values))
        if self.pcf_variance:
            assert embeddings is not None  # see above
            metrics_t = calc_topological_metrics(embeddings, self.pcf_variance, categories=categories)
            for key in unreduced:
                unreduced[key].update(metrics_t.get(key, {}) if categories is not None else metrics_t)

        self.metrics_unreduced = unreduced
        self.metrics = reduce_metrics(unreduced)

        if self.return_only_overall_category:
            output = {OVERALL_CATEGORIES_KEY: deepcopy(self.metrics[OVERALL_CATEGORIES_KEY])}
        else:
            output = deepcopy(self.metrics)
        if self.verbose and is_main_process():
            logger.info("\nMetrics:\n%s", pformat(output))
        return output

    def _fnmr_groups(self) -> list[Any]:
        """The groups of queries ``fnmr@fmr`` is computed for: ``OVERALL`` (and every category with
        ``fnmr_per_category``)."""
        return list(self._queries_of_category) if self.fnmr_per_category else [OVERALL_CATEGORIES_KEY]

    def _retrieve(self) -> RetrievalResults:
        """The retrieval results of the collected embeddings (before the post-processor)."""
        assert self.embeddings is not None
        return RetrievalResults.from_embeddings(
            self.embeddings,
            self.dataset,
            n_items=self._n_items_to_retrieve(),
            distance=self.distance,
            knn_backend=self.knn_backend,
            registry=self.registry,
        )

    def metric_keys(self) -> list[str]:
        """The flat keys (``OVERALL/cmc/1``, ``<category>/map/5``, ``OVERALL/fnmr@fmr/0.1`` (per category too with
        ``fnmr_per_category``), ``OVERALL/pcf/0.5``) of the metrics :meth:`compute_metrics` will return, known
        before any embedding is collected (a pipeline checks its ``metric_for_checkpointing`` against them)."""
        categories = get_categories(self.dataset)
        groups: list[Any] = [OVERALL_CATEGORIES_KEY]
        if categories is not None and not self.return_only_overall_category:
            query_ids, _ = get_query_gallery_ids(self.dataset, VALIDATION_SPLIT)
            groups += list(unique_categories(categories[query_ids.numpy()]))
        values: list[tuple[str, Any]] = [(name, k) for name, top_k in self.top_k.items() for k in top_k]
        fnmr = [("fnmr@fmr", v) for v in self.fmr_vals]
        pcf = [("pcf", v) for v in self.pcf_variance]
        return [
            f"{group}/{name}/{value}"
            for group in groups
            for name, value in values
            + (fnmr if group == OVERALL_CATEGORIES_KEY or self.fnmr_per_category else [])
            + pcf
        ]

    # ---------------------------------------------------------------------------------- visualisation
    def _check_computed(self) -> None:
        if self.metrics_unreduced is None or self.retrieval_results is None:
            raise ValueError("metrics were not computed yet: call compute_metrics() first")

    def get_worst_queries_ids(self, metric_name: str, n_queries: int) -> list[int]:
        """The queries with the lowest values of a per-query metric, worst first (ties: lower id first).

        Args:
            metric_name: A flat metric key such as ``"OVERALL/map/5"`` or ``"<category>/cmc/1"``.
            n_queries: How many queries to return (fewer when the category has fewer).

        Returns:
            Positions of the queries among ``dataset.get_query_ids()`` (whatever the category).
        """
        self._check_computed()
        assert self.metrics_unreduced is not None  # _check_computed raised otherwise
        flat = flatten_unreduced(self.metrics_unreduced)
        if metric_name not in flat:
            per_query = sorted(k for k, v in flat.items() if v.ndim == 1)
            close = difflib.get_close_matches(metric_name, per_query, n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"Unknown metric {metric_name!r}.{hint} Per-query metrics: {per_query}")
        values = flat[metric_name]
        if values.ndim != 1:
            raise ValueError(f"{metric_name!r} has no per-query values to rank queries by")
        category = metric_name.split("/", 1)[0]
        positions = self._queries_of_category.get(category)
        if positions is None:  # a category key that is not a string, e.g. an int category
            positions = next(p for key, p in self._queries_of_category.items() if str(key) == category)
        order = torch.sort(values.float(), stable=True).indices[: max(0, n_queries)]
        return positions[order].tolist()

    def get_plot_for_queries(self, query_ids: list[int], n_instances: int, verbose: bool = True) -> Figure:
        """Draw the queries ``query_ids`` (positions among the queries) with their ``n_instances`` first
        retrieved items (green: relevant, red: not) and a few of their ground-truth items.

        See :meth:`RetrievalResults.visualize`; the dataset must be able to draw its items.
        """
        self._check_computed()
        assert self.retrieval_results is not None
        return self.retrieval_results.visualize(
            query_ids=list(query_ids),
            dataset=self.dataset,
            n_galleries_to_show=n_instances,
            n_gt_to_show=N_GT_SHOW_EMBEDDING_METRICS,
            verbose=verbose,
        )

    def get_plot_for_worst_queries(
        self, metric_name: str, n_queries: int, n_instances: int, verbose: bool = False
    ) -> Figure:
        """:meth:`get_plot_for_queries` for the ``n_queries`` worst queries by ``metric_name``."""
        query_ids = self.get_worst_queries_ids(metric_name=metric_name, n_queries=n_queries)
        return self.get_plot_for_queries(query_ids=query_ids, n_instances=n_instances, verbose=verbose)

    def _visualised_metric_names(self) -> list[str]:
        assert self.metrics_unreduced is not None
        names = []
        excluded = set(self.metrics_to_exclude_from_visualization)
        for name, values in flatten_unreduced(self.metrics_unreduced).items():
            parts = name.split("/")
            if values.ndim != 1 or name in excluded or excluded.intersection(parts[1:]):
                continue
            if self.visualize_only_overall_category and parts[0] != OVERALL_CATEGORIES_KEY:
                continue
            names.append(name)
        return names

    def visualize(self) -> tuple[list[Figure], list[str]]:
        """Draw the worst queries by every per-query metric (except those excluded from visualisation).

        Returns:
            ``(figures, titles)``: one figure of the :data:`LOG_TOPK_ROWS_PER_METRIC` worst queries per metric,
            titled ``"top 5 worst by OVERALL_cmc_1"``.
        """
        self._check_computed()
        figures, titles = [], []
        for name in self._visualised_metric_names():
            figures.append(
                self.get_plot_for_worst_queries(
                    metric_name=name, n_queries=LOG_TOPK_ROWS_PER_METRIC, n_instances=LOG_TOPK_IMAGES_PER_ROW
                )
            )
            titles.append(f"top {LOG_TOPK_ROWS_PER_METRIC} worst by {name}".replace("/", "_"))
        return figures, titles


def _mask(positions: Tensor, n: int) -> Tensor:
    mask = torch.zeros(n, dtype=torch.bool)
    mask[positions] = True
    return mask


class EmbeddingMetricsDDP(EmbeddingMetrics):
    """:class:`EmbeddingMetrics` (which works under DDP as it is) with the option to shard the gallery, oml's
    name from before ``EmbeddingMetrics`` gathered by itself (OML 3.x's ``EmbeddingMetricsDDP``).

    Takes the arguments of :class:`EmbeddingMetrics`, and ``shard_gallery``:

    - ``False`` (the default): :meth:`sync` all-gathers the embeddings, so every process holds them all and
      computes every metric: exactly :class:`EmbeddingMetrics`.
    - ``True``: every process keeps only the embeddings it collected, and :meth:`sync` runs the exact search over
      the gallery sharded across the processes (:func:`~oml_core.knn.sharded.search_sharded`): no process holds the
      whole gallery nor a ``Q x G`` block, and every process gets the retrieval results (``Q x k``) of all the
      queries, the single-process ones. ``fnmr@fmr`` and ``pcf`` need every embedding in one process and are
      refused, as is a ``knn_backend`` (the sharded search is exact); :attr:`embeddings` is ``None``.

    :meth:`compute_metrics` calls :meth:`sync` (every process must call it); without an initialised process
    group it gathers nothing (the sharded search then runs on the one process's items). Items that DDP samplers
    repeat to pad the last batches count once.

    Raises:
        ValueError: ``shard_gallery`` with ``fmr_vals``, ``pcf_variance`` or ``knn_backend``.
    """

    def __init__(self, *args: Any, shard_gallery: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shard_gallery = bool(shard_gallery)
        if self.shard_gallery:
            given = {
                "fmr_vals": self.fmr_vals,
                "pcf_variance": self.pcf_variance,
                "knn_backend": self.knn_backend,
            }
            off = {"fmr_vals": "[]", "pcf_variance": "[]", "knn_backend": "null"}
            refused = [name for name, value in given.items() if value]
            if refused:
                raise ValueError(
                    f"shard_gallery keeps every embedding in the one process that computed it, so "
                    f"{' and '.join(refused)} cannot be computed: set "
                    f"{', '.join(f'{name}={off[name]}' for name in refused)}"
                )
        self._sharded: KnnResult | None = None
        self._n_collected_sharded = 0

    def setup(self, num_samples: int | None = None) -> None:
        super().setup(num_samples)
        self._sharded = None
        self._n_collected_sharded = 0

    def sync(self) -> None:
        """All-gather the collected ``(indices, embeddings)`` of every process into every process (see
        :meth:`EmbeddingMetrics.sync`); with ``shard_gallery``, search the sharded gallery for every query
        instead."""
        if not self.shard_gallery:
            super().sync()
        elif not self._synced:
            self._sync_sharded()
            self._synced = True

    def _sync_sharded(self) -> None:
        from oml_core.knn.sharded import search_sharded

        n_items = self._dataset_size()
        storage = self.acc.storage
        n_rows = self.acc.collected_samples
        ids = torch.as_tensor(storage.get(INDICES_KEY, [])[:n_rows], dtype=torch.long)
        collected = torch.zeros(n_items, dtype=torch.bool)
        collected[ids] = True
        owned, collected_anywhere = _owned_here(collected)
        self._n_collected_sharded = int(collected_anywhere.sum())
        if self._n_collected_sharded != n_items:  # compute_metrics says so; no search on part of the data
            return
        local = owned.nonzero().squeeze(1)
        last = torch.zeros(n_items, dtype=torch.long)
        last[ids] = torch.arange(len(ids))  # the last row given for an index, as update() documents
        embeddings = cast(Tensor, storage[EMBEDDINGS_ACC_KEY])[:n_rows]
        query_ids, gallery_ids = get_query_gallery_ids(self.dataset, VALIDATION_SPLIT)
        labels = labels_of(self.dataset)
        self._sharded = search_sharded(
            local,
            embeddings[last[local]],
            query_ids,
            gallery_ids,
            self._n_items_to_retrieve(),
            labels_gt=None if labels is None else factorize(labels),
            sequence_ids=get_sequence_ids(self.dataset),
            distance=self.distance,
        )

    def _n_collected(self) -> int:
        return self._n_collected_sharded if self.shard_gallery else super()._n_collected()

    @property
    def embeddings(self) -> Tensor | None:
        """See :attr:`EmbeddingMetrics.embeddings`; ``None`` with ``shard_gallery`` (no process holds them all)."""
        return None if self.shard_gallery else super().embeddings

    def _retrieve(self) -> RetrievalResults:
        if not self.shard_gallery:
            return super()._retrieve()
        assert self._sharded is not None  # compute_metrics synced, and every item was collected
        return RetrievalResults._from_knn(self._sharded)


def _owned_here(collected: Tensor) -> tuple[Tensor, Tensor]:
    """``(owned, collected_anywhere)`` of a ``[n_items]`` mask of the items this process collected: the items
    it collected and no process of a lower rank did (an item that padding repeated belongs to one process), and
    the items any process collected."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return collected.clone(), collected
    device = comm_device()
    masks = [torch.empty_like(collected, device=device) for _ in range(dist.get_world_size())]
    dist.all_gather(masks, collected.to(device))
    stacked = torch.stack(masks).cpu()
    earlier = stacked[: dist.get_rank()].any(0)
    return stacked[dist.get_rank()] & ~earlier, stacked.any(0)


def _checked_postprocessor(postprocessor: Any) -> IRetrievalPostprocessor | None:
    """``postprocessor`` when it re-ranks retrieval results; a ``TypeError`` saying what to use instead for a
    distance-matrix post-processor (OML's older ``IDistancesPostprocessor``)."""
    if postprocessor is None or isinstance(postprocessor, IRetrievalPostprocessor):
        return postprocessor
    if isinstance(postprocessor, IDistancesPostprocessor):
        raise TypeError(
            f"postprocessor: {type(postprocessor).__name__} re-ranks a whole distance matrix "
            "(process(distances, queries, galleries)); EmbeddingMetrics re-ranks retrieval results in bounded "
            "memory: pass an IRetrievalPostprocessor such as oml_postprocessors.PairwiseReranker(top_n, "
            "pairwise_model, num_workers, batch_size)"
        )
    raise TypeError(
        f"postprocessor must be an IRetrievalPostprocessor (process(rr, dataset) -> RetrievalResults), "
        f"got {type(postprocessor).__name__}"
    )


__all__ = [
    "CATEGORIES_COLUMNS",
    "EmbeddingMetrics",
    "EmbeddingMetricsDDP",
    "LOG_TOPK_IMAGES_PER_ROW",
    "LOG_TOPK_ROWS_PER_METRIC",
    "N_GT_SHOW_EMBEDDING_METRICS",
    "VALIDATION_SPLIT",
    "calc_fnmr_at_fmr_rr",
    "flatten_unreduced",
    "is_main_process",
    "calc_retrieval_metrics_rr",
    "check_ground_truth",
    "flatten_metrics",
    "get_categories",
]
