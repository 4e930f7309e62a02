"""``PairwiseReranker``: re-rank the ``top_n`` retrieved items of every query with a pairwise model (STIR)."""

from __future__ import annotations

import torch
from torch import LongTensor

from oml_core.interfaces.datasets import IQueryGalleryDataset
from oml_core.interfaces.retrieval import IRetrievalPostprocessor
from oml_core.retrieval.retrieval_results import RetrievalResults
from oml_postprocessors.ordering import rerank_top_n
from oml_postprocessors.pairs import PairDataset
from oml_postprocessors.scorer import PairwiseScorer


class PairwiseReranker(PairwiseScorer, IRetrievalPostprocessor):
    """Re-rank the first ``top_n`` retrieved items of every query by the scores of a pairwise model.

    The pairs ``(query, retrieved item)`` of the ``top_n`` items retrieved first for every query (all of them
    when fewer were retrieved) are scored with ``pairwise_model.predict(x1, x2)``; ``x1`` and ``x2`` are the
    items' inputs in the dataset, ``dataset[i][dataset.input_tensors_key]`` (images for an image dataset,
    embeddings for an embeddings dataset), batched (:class:`~oml_postprocessors.pairs.PairDataset`). The
    scores are distance-like (smaller: closer). The re-scored items are then ordered by their new scores and
    the rest follow in their previous order with their previous distances; the new scores are scaled down when
    needed to stay below the rest (:func:`~oml_postprocessors.ordering.rerank_top_n` has the exact rule).

    Only ``n_query * top_n`` pairs are scored; nothing of size ``n_query x n_gallery`` is built.

    Args: see :class:`~oml_postprocessors.scorer.PairwiseScorer`.

    Example (one query, ``top_n=3``, new scores of the first three ``[0.4, 0.2, 0.3]``)::

        rr.retrieved_ids = [[3,   2,   1,   0,   4  ]]
        rr.distances     = [[0.1, 0.2, 0.5, 0.6, 0.7]]
        # re-ranked:
        retrieved_ids    = [[2,   1,   3,   0,   4  ]]
        distances        = [[0.2, 0.3, 0.4, 0.6, 0.7]]
        # with new scores [1, 2, 5] for distances [0.1, 0.2, 0.3, 0.5, 0.6] instead, the scores are scaled
        # by 0.5 / 5: distances = [0.1 - eps, 0.2 - eps, 0.5 - eps, 0.5, 0.6]
    """

    def process(self, rr: RetrievalResults, dataset: IQueryGalleryDataset | None = None) -> RetrievalResults:
        """Re-rank the ``top_n`` first items of every query of ``rr``.

        Args:
            rr: Retrieval results over ``dataset`` (ids are positions within its gallery); not modified.
            dataset: The dataset with the query/gallery split that ``rr`` was computed on.

        Returns:
            New ``RetrievalResults``: the first ``min(top_n, n_retrieved)`` items of every query permuted by
            their new scores, the others unchanged after them; every query keeps its number of items; the
            ground truth and ``n_gallery`` are those of ``rr``. Queries with nothing retrieved stay empty.

        Raises:
            ValueError: ``dataset`` is missing, has another number of queries than ``rr``, or fewer gallery
                items than ``rr`` refers to; the pairwise model gives non-finite scores.
        """
        pair_ids = self._pair_ids(rr, dataset)
        scores = self.score(PairDataset(dataset, pair_ids))
        distances, retrieved_ids = rerank_top_n(rr.distances, rr.retrieved_ids, scores, self.top_n)
        return RetrievalResults(distances, retrieved_ids, gt_ids=rr.gt_ids, n_gallery=rr.n_gallery)

    def _pair_ids(self, rr: RetrievalResults, dataset: IQueryGalleryDataset | None) -> LongTensor:
        """``[n_pairs, 2]`` dataset indices (query, retrieved item) of the re-scored items, query by query."""
        if dataset is None:
            raise ValueError(
                f"{type(self).__name__}.process needs the dataset that the retrieval results were computed on"
            )
        query_ids = torch.as_tensor(dataset.get_query_ids(), dtype=torch.long).cpu()
        gallery_ids = torch.as_tensor(dataset.get_gallery_ids(), dtype=torch.long).cpu()
        if len(query_ids) != rr.n_queries:
            raise ValueError(
                f"the retrieval results have {rr.n_queries} queries but {type(dataset).__name__} has "
                f"{len(query_ids)}; they must be the same"
            )
        top = rr.retrieved_ids.truncate(rr.retrieved_ids.lengths.clamp(max=self.top_n))
        positions = top.values.cpu()
        if positions.numel() and int(positions.max()) >= len(gallery_ids):
            raise ValueError(
                f"the retrieval results refer to the gallery position {int(positions.max())} but "
                f"{type(dataset).__name__} has {len(gallery_ids)} gallery items"
            )
        return torch.stack([query_ids[top.row_ids().cpu()], gallery_ids[positions]], dim=1)


__all__ = ["PairwiseReranker"]
