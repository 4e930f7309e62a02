"""Datasets of pairs (of embeddings, of images), as pairwise models and re-ranking postprocessors take them.

Items are dicts ``{pairs_1st_key: first, pairs_2nd_key: second, index_key: i}``.

OML's ``PairDataset(base_dataset, pair_ids, ...)`` (pairs of items of one dataset, what a re-ranker scores) is
oml-postprocessors' class, found on first access through the installed post-processor plugins by
:mod:`oml_core.compat.postprocessor_names`: the core imports no plugin.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torch import Tensor

from oml_core.datasets.dataframe_format import TBBox
from oml_core.datasets.images import ImageBaseDataset, TImReader
from oml_core.interfaces.datasets import IPairDataset
from oml_core.utils.lazy import lazy_exports


class _PairsKeys(IPairDataset):
    """The keys of a pairs dataset, under the interface's names and OML's argument names."""

    def _set_keys(self, pair_1st_key: str, pair_2nd_key: str, index_key: str) -> None:
        self.pairs_1st_key = pair_1st_key
        self.pairs_2nd_key = pair_2nd_key
        self.index_key = index_key

    @property
    def pair_1st_key(self) -> str:
        """OML's attribute name of :attr:`pairs_1st_key`."""
        return self.pairs_1st_key

    @property
    def pair_2nd_key(self) -> str:
        """OML's attribute name of :attr:`pairs_2nd_key`."""
        return self.pairs_2nd_key

    @abstractmethod
    def __len__(self) -> int:
        """The number of pairs."""

    def _check_index(self, idx: int) -> int:
        idx = int(idx)
        if not 0 <= idx < len(self):
            raise IndexError(f"{type(self).__name__}: index {idx} is out of range for {len(self)} pairs")
        return idx


class EmbeddingPairsDataset(_PairsKeys):
    """Dataset to iterate over pairs of embeddings: pair ``i`` is ``(embeddings1[i], embeddings2[i])``."""

    def __init__(
        self,
        embeddings1: Tensor,
        embeddings2: Tensor,
        pair_1st_key: str = "input_tensors_1",
        pair_2nd_key: str = "input_tensors_2",
        index_key: str = "idx",
    ):
        """
        Args:
            embeddings1: The first input embeddings, ``[N, ...]`` (at least 2-d).
            embeddings2: The second input embeddings, of the same shape as ``embeddings1``.
            pair_1st_key: Key to put ``embeddings1`` into the batches.
            pair_2nd_key: Key to put ``embeddings2`` into the batches.
            index_key: Key to put samples' ids into the batches.

        Raises:
            TypeError: An embeddings argument is not a tensor.
            ValueError: The two shapes differ (different numbers of pairs included) or are not at least 2-d.
        """
        for name, value in (("embeddings1", embeddings1), ("embeddings2", embeddings2)):
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"EmbeddingPairsDataset: {name} must be a torch.Tensor, got {type(value).__name__}"
                )
            if value.ndim < 2:
                raise ValueError(
                    f"EmbeddingPairsDataset: {name} must be at least 2-d [N, D], got the shape {tuple(value.shape)}"
                )
        if embeddings1.shape != embeddings2.shape:
            raise ValueError(
                f"EmbeddingPairsDataset: embeddings1 has the shape {tuple(embeddings1.shape)} and embeddings2 "
                f"{tuple(embeddings2.shape)}; they must be equal (one row of each per pair)"
            )
        self.embeddings1 = embeddings1
        self.embeddings2 = embeddings2
        self._set_keys(pair_1st_key, pair_2nd_key, index_key)

    def __getitem__(self, idx: int) -> dict[str, Any]:
        """``{pairs_1st_key: embeddings1[idx], pairs_2nd_key: embeddings2[idx], index_key: idx}``."""
        idx = self._check_index(idx)
        return {
            self.pairs_1st_key: self.embeddings1[idx],
            self.pairs_2nd_key: self.embeddings2[idx],
            self.index_key: idx,
        }

    def __len__(self) -> int:
        return len(self.embeddings1)


class ImagePairsDataset(_PairsKeys):
    """Dataset to iterate over pairs of images: pair ``i`` is the images ``(paths1[i], paths2[i])``.

    Lazy: constructing it reads no image; the images of a pair are read (through one LRU cache shared by both
    sides, so an image in several pairs is decoded once while cached) when the pair is asked for. Reading,
    cropping and transforming are those of :class:`~oml_core.datasets.images.ImageBaseDataset`.
    """

    def __init__(
        self,
        paths1: Sequence[Path | str],
        paths2: Sequence[Path | str],
        bboxes1: Sequence[TBBox | None] | None = None,
        bboxes2: Sequence[TBBox | None] | None = None,
        transform: Callable[[Any], Any] | None = None,
        f_imread: TImReader | None = None,
        pair_1st_key: str = "input_tensors_1",
        pair_2nd_key: str = "input_tensors_2",
        index_key: str = "idx",
        cache_size: int | None = 0,
    ):
        """
        Args:
            paths1: Paths to the 1st input images.
            paths2: Paths to the 2nd input images (as many as ``paths1``).
            bboxes1: ``None`` or one entry per path of ``paths1``: ``None`` (the whole image) or
                ``(x1, y1, x2, y2)``. If an image has N boxes, duplicate its path N times.
            bboxes2: The same as ``bboxes1``, for ``paths2``.
            transform: Augmentations for the images; ``None`` only normalises and casts to a tensor.
            f_imread: Function to read the images; ``None`` means :func:`oml_core.utils.images.imread_pil`.
            pair_1st_key: Key to put the 1st images into the batches.
            pair_2nd_key: Key to put the 2nd images into the batches.
            index_key: Key to put samples' ids into the batches.
            cache_size: Size of the cache of decoded images (shared by both sides); ``0`` or ``None``: no cache.

        Raises:
            ValueError: ``paths2`` (or ``bboxes1``, ``bboxes2``) has another length than ``paths1``, or a box is
                not ``0 <= x1 < x2, 0 <= y1 < y2``.
        """
        paths1, paths2 = list(paths1), list(paths2)
        n = len(paths1)
        if len(paths2) != n:
            raise ValueError(
                f"ImagePairsDataset: paths1 has {n} paths and paths2 {len(paths2)}; they must be equal"
            )
        sides = []
        for name, paths, bboxes in (
            ("the 1st images (paths1, bboxes1)", paths1, bboxes1),
            ("the 2nd images (paths2, bboxes2)", paths2, bboxes2),
        ):
            try:
                sides.append(
                    ImageBaseDataset(
                        paths, bboxes=bboxes, transform=transform, f_imread=f_imread, cache_size=cache_size
                    )
                )
            except ValueError as e:
                raise ValueError(f"ImagePairsDataset: {name}: {e}") from e
        self._first, self._second = sides
        self._second._cache = self._first._cache  # one cache: an image on both sides is decoded once
        self._set_keys(pair_1st_key, pair_2nd_key, index_key)

    def __getitem__(self, idx: int) -> dict[str, Any]:
        """``{pairs_1st_key: image1, pairs_2nd_key: image2, index_key: idx}``: the transformed (cropped) images
        of ``paths1[idx]`` and ``paths2[idx]``."""
        idx = self._check_index(idx)
        key = self._first.input_tensors_key
        return {
            self.pairs_1st_key: self._first[idx][key],
            self.pairs_2nd_key: self._second[idx][key],
            self.index_key: idx,
        }

    def __len__(self) -> int:
        return len(self._first)


# OML's name that lives in a plugin, from OML's compatibility package when it is asked for
__getattr__, __dir__ = lazy_exports(__name__, {"PairDataset": "oml_core.compat.postprocessor_names"})


__all__ = ["EmbeddingPairsDataset", "ImagePairsDataset"]  # and PairDataset, found by __getattr__
