"""The manual's distance-matrix form of pairwise post-processing: a ``[Q, G]`` distance matrix in, one out.

``PairwisePostprocessor`` re-scores the ``top_n`` smallest distances of every row with a pairwise model;
``PairwiseEmbeddingsPostprocessor`` feeds the model pairs of embeddings, ``PairwiseImagesPostprocessor`` pairs
of images read from paths. The matrix is the caller's (OML's contract): these classes take and return a
whole ``[Q, G]`` matrix (a new one; the input is not modified). For memory-bounded re-ranking of
``RetrievalResults`` use :class:`~oml_postprocessors.reranker.PairwiseReranker`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from oml_core.datasets.pairs import EmbeddingPairsDataset, ImagePairsDataset
from oml_core.interfaces.models import IPairwiseModel
from oml_core.interfaces.retrieval import IDistancesPostprocessor
from oml_postprocessors.ordering import update_top_n_in_matrix
from oml_postprocessors.scorer import PairwiseScorer


def _select(values: Any, mask: Tensor) -> Any:
    """The entries of ``values`` (a tensor or a sequence) where ``mask`` is true."""
    if isinstance(values, Tensor):
        return values[mask.to(values.device)]
    return [value for value, keep in zip(values, mask.tolist()) if keep]


class PairwisePostprocessor(PairwiseScorer, IDistancesPostprocessor, ABC):
    """This postprocessor allows us to re-estimate the distances between queries and ``top_n`` galleries
    closest to them. It creates pairs of queries and galleries and feeds them to a pairwise model.

    Subclasses say how pairs of their items are scored (:meth:`inference`) and under which key of a batch
    dict their items are (:attr:`items_key`, for :meth:`process_by_dict`).

    Args: those of :class:`~oml_postprocessors.scorer.PairwiseScorer`, and
        is_query_key: Key of the boolean mask of the queries in :meth:`process_by_dict`'s ``data``.
        is_gallery_key: Key of the boolean mask of the gallery items in :meth:`process_by_dict`'s ``data``.
    """

    def __init__(
        self,
        top_n: int,
        pairwise_model: IPairwiseModel,
        num_workers: int,
        batch_size: int,
        verbose: bool = False,
        use_fp16: bool = False,
        is_query_key: str = "is_query",
        is_gallery_key: str = "is_gallery",
    ) -> None:
        super().__init__(top_n, pairwise_model, num_workers, batch_size, verbose, use_fp16)
        self.is_query_key = is_query_key
        self.is_gallery_key = is_gallery_key

    @property
    @abstractmethod
    def items_key(self) -> str:
        """Key of the items (embeddings, paths) in :meth:`process_by_dict`'s ``data``."""

    @abstractmethod
    def inference(self, queries: Any, galleries: Any, ii_top: Tensor, top_n: int) -> Tensor:
        """Scores of the pairs of every query and its ``top_n`` closest galleries.

        Args:
            queries: Queries in the amount of Q.
            galleries: Galleries in the amount of G.
            ii_top: Indices of the closest galleries with the shape of ``[Q, top_n]``.
            top_n: Number of the closest galleries to re-rank.

        Returns:
            ``[Q, top_n]`` new distances: ``[i, k]`` is the score of ``(queries[i], galleries[ii_top[i, k]])``.
        """

    def process(self, distances: Tensor, queries: Any, galleries: Any) -> Tensor:
        """Re-score the ``top_n`` smallest distances of every row.

        With ``n = min(top_n, G)``, the ``n`` smallest entries of every row (``torch.topk``; which of equal
        entries at the boundary are taken is unspecified) are replaced by the pairwise model's scores of their
        pairs; every other entry of the row is shifted by one offset so that it keeps its order and stays above
        the new scores (:func:`~oml_postprocessors.ordering.update_top_n_in_matrix`: the smallest of them
        becomes ``max(new scores) + 1e-5``). When ``n == G`` the whole row is re-scored and nothing is shifted.

        Args:
            distances: Matrix with the shape of ``[Q, G]``; not modified.
            queries: Queries in the amount of Q.
            galleries: Galleries in the amount of G.

        Returns:
            Distance matrix with the shape of ``[Q, G]`` (a new tensor, of the dtype and device of
            ``distances``), where ``top_n`` minimal values in each row have been updated by the pairwise model,
            other distances are shifted by a margin to keep the relative order.

        Raises:
            ValueError: ``distances`` is not 2-D, or ``queries`` / ``galleries`` are not Q / G items.
        """
        if not isinstance(distances, Tensor) or distances.ndim != 2:
            raise ValueError(
                f"distances must be a [Q, G] tensor, got {getattr(distances, 'shape', distances)!r}"
            )
        n_queries, n_galleries = distances.shape
        for name, items, expected in (("queries", queries, n_queries), ("galleries", galleries, n_galleries)):
            if len(items) != expected:
                raise ValueError(
                    f"{name} must hold {expected} items for distances of the shape {tuple(distances.shape)}, "
                    f"got {len(items)}"
                )
        top_n = min(self.top_n, n_galleries)
        if n_queries == 0 or top_n == 0:
            return distances.clone()
        smallest, ii = torch.topk(distances, k=min(top_n + 1, n_galleries), dim=1, largest=False)
        ii_top = ii[:, :top_n]
        new_top = self.inference(queries, galleries, ii_top.cpu(), top_n)
        next_smallest = smallest[:, top_n] if top_n < n_galleries else None
        return update_top_n_in_matrix(distances, ii_top, new_top, next_smallest)

    def process_by_dict(self, distances: Tensor, data: Mapping[str, Any]) -> Tensor:
        """:meth:`process` with the queries and galleries taken from a dict of all the items: ``data[items_key]``
        selected by the boolean masks ``data[is_query_key]`` and ``data[is_gallery_key]``.

        Raises:
            KeyError: ``data`` lacks one of the keys (the message names it).
        """
        for key in (self.items_key, self.is_query_key, self.is_gallery_key):
            if key not in data:
                raise KeyError(f"data has no {key!r}; its keys are {sorted(data)}")
        items = data[self.items_key]
        is_query = torch.as_tensor(data[self.is_query_key]).bool().cpu()
        is_gallery = torch.as_tensor(data[self.is_gallery_key]).bool().cpu()
        return self.process(distances, _select(items, is_query), _select(items, is_gallery))


class PairwiseEmbeddingsPostprocessor(PairwisePostprocessor):
    """Pairwise post-processing of a distance matrix with a model that takes two embeddings.

    Args: those of :class:`PairwisePostprocessor`, and
        embeddings_key: Key of the embeddings in :meth:`process_by_dict`'s ``data``.
    """

    def __init__(
        self,
        top_n: int,
        pairwise_model: IPairwiseModel,
        num_workers: int,
        batch_size: int,
        verbose: bool = False,
        use_fp16: bool = False,
        is_query_key: str = "is_query",
        is_gallery_key: str = "is_gallery",
        embeddings_key: str = "embeddings",
    ) -> None:
        super().__init__(
            top_n, pairwise_model, num_workers, batch_size, verbose, use_fp16, is_query_key, is_gallery_key
        )
        self.embeddings_key = embeddings_key

    @property
    def items_key(self) -> str:
        """:attr:`embeddings_key`."""
        return self.embeddings_key

    def inference(self, queries: Tensor, galleries: Tensor, ii_top: Tensor, top_n: int) -> Tensor:
        """Scores ``[Q, top_n]`` of the pairs (query embedding, embedding of one of its closest galleries).

        Args:
            queries: Queries representations with the shape of ``[Q, *]``.
            galleries: Galleries representations with the shape of ``[G, *]``.
            ii_top: Indices of the closest galleries with the shape of ``[Q, top_n]``.
            top_n: Number of the closest galleries to re-rank.
        """
        pairs = EmbeddingPairsDataset(
            queries.repeat_interleave(top_n, dim=0), galleries[ii_top.reshape(-1).to(galleries.device)]
        )
        return self.score(pairs).view(len(queries), top_n)


class PairwiseImagesPostprocessor(PairwisePostprocessor):
    """Pairwise post-processing of a distance matrix with a model that takes two images.

    Args: those of :class:`PairwisePostprocessor` (with the manual's defaults ``num_workers=0``,
        ``batch_size=128``, ``verbose=True``), and
        transforms: Transforms that will be applied to an image (``None``: only normalised and made a tensor,
            as :class:`~oml_core.datasets.pairs.ImagePairsDataset` does).
        paths_key: Key of the paths of the images in :meth:`process_by_dict`'s ``data``.

    Raises:
        TypeError: ``transforms`` is neither callable nor ``None``.
    """

    def __init__(
        self,
        top_n: int,
        pairwise_model: IPairwiseModel,
        transforms: Callable[[Any], Any] | None,
        num_workers: int = 0,
        batch_size: int = 128,
        verbose: bool = True,
        use_fp16: bool = False,
        is_query_key: str = "is_query",
        is_gallery_key: str = "is_gallery",
        paths_key: str = "paths",
    ) -> None:
        super().__init__(
            top_n, pairwise_model, num_workers, batch_size, verbose, use_fp16, is_query_key, is_gallery_key
        )
        if transforms is not None and not callable(transforms):
            raise TypeError(f"transforms must be callable or None, got {type(transforms).__name__}")
        self.transforms = transforms
        self.paths_key = paths_key

    @property
    def items_key(self) -> str:
        """:attr:`paths_key`."""
        return self.paths_key

    def inference(
        self, queries: Sequence[Path | str], galleries: Sequence[Path | str], ii_top: Tensor, top_n: int
    ) -> Tensor:
        """Scores ``[Q, top_n]`` of the pairs (query image, image of one of its closest galleries).

        Every query image is read once (it is in ``top_n`` consecutive pairs; a small cache keeps it).

        Args:
            queries: Paths to queries with the length of Q.
            galleries: Paths to galleries with the length of G.
            ii_top: Indices of the closest galleries with the shape of ``[Q, top_n]``.
            top_n: Number of the closest galleries to re-rank.
        """
        paths1 = [path for path in queries for _ in range(top_n)]
        paths2 = [galleries[j] for j in ii_top.reshape(-1).tolist()]
        pairs = ImagePairsDataset(paths1, paths2, transform=self.transforms, cache_size=2)
        return self.score(pairs).view(len(queries), top_n)


__all__ = ["PairwiseEmbeddingsPostprocessor", "PairwiseImagesPostprocessor", "PairwisePostprocessor"]
