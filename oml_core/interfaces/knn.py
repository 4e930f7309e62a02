"""The interface of a k-nearest-neighbour index, what the registry's ``knn_backend`` kind holds."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, NamedTuple

from torch import Tensor

if TYPE_CHECKING:
    from pathlib import Path


class CannotRemoveError(Exception):
    """Raised by :meth:`IKnnIndex.remove` of a backend (or of the structure it built) that cannot remove items,
    before anything changed: whoever holds the items builds a new index of those that remain instead (a
    :class:`~oml_core.index.GalleryIndex` does)."""


class KnnSearchResult(NamedTuple):
    """What :meth:`IKnnIndex.search` returns for ``Q`` queries and ``k`` neighbours.

    Row ``q`` holds query ``q``'s neighbours by ascending distance; a query with fewer than ``k`` retrievable
    items has its row padded with ``inf`` distances and ``-1`` ids after them.
    """

    #: ``[Q, k]`` distances (``"l2"``: Euclidean; ``"cosine"``: ``1 - cosine similarity``), float32.
    distances: Tensor
    #: ``[Q, k]`` ids of the retrieved items (the ids given to :meth:`IKnnIndex.add`), int64.
    ids: Tensor


class IKnnIndex(ABC):
    """A set of embeddings to search for the nearest neighbours of queries.

    Contract, for every backend:

    - Items are added with :meth:`add`, each with an integer id (returned by :meth:`search`) and an integer
      *group*. :meth:`search` never returns, for query ``q``, an item whose group equals ``exclude[q]``: a
      query's own item (group = dataset index) and the items of its sequence (group = sequence id) are left out
      this way. A backend that cannot mask inside its search fetches more and filters (see
      :func:`oml_core.knn.exclusion.search_excluding`); either way up to ``k`` *retrievable* items are
      returned.
    - ``distance`` is ``"l2"`` or ``"cosine"`` and is fixed when the index is made; distances are returned in
      that metric whatever the backend computes internally (e.g. faiss's squared L2 or inner products).
    - An exact backend returns the true ``k`` nearest, ties ordered by the order the items were added. An
      approximate one documents its parameters and how close it gets (recall@k against exact).
    - :meth:`remove` is a declared capability: a backend that can remove items by id does so (the others keep
      their order, as if only they had been added); one that cannot (an HNSW graph, a product-quantised index)
      keeps the default, which raises :class:`CannotRemoveError`.
    - :meth:`save` writes everything :meth:`load` needs into one folder, with no pickled code: a saved index
      loads with ``torch.load(weights_only=True)`` or the backend's own file format.
    """

    #: ``"l2"`` or ``"cosine"``.
    distance: str
    #: Whether the items live outside the folder that :meth:`save` writes (a database's collection, which the
    #: folder names and :meth:`load` checks): a gallery index then commits every change as a whole generation,
    #: since a segment of its log would be replayed on an older save, whose collection has changed since.
    holds_items_outside: bool = False

    @abstractmethod
    def add(self, embeddings: Tensor, ids: Tensor | None = None, groups: Tensor | None = None) -> None:
        """Add ``[n, dim]`` ``embeddings``, with ``ids`` (``[n]`` int64; default: their positions in the index,
        ``len(self)`` on) and exclusion ``groups`` (``[n]`` int64; default: the ids)."""

    @abstractmethod
    def search(self, queries: Tensor, k: int, exclude: Tensor | None = None) -> KnnSearchResult:
        """The ``k`` nearest items of each of the ``[Q, dim]`` ``queries``, leaving out, for query ``q``, the
        items whose group is ``exclude[q]`` (``[Q]`` integers; ``None``: nothing left out)."""

    def remove(self, ids: Tensor) -> None:
        """Remove every item added with one of the ``[n]`` int64 ``ids``; the others keep their order, ids and
        groups, and later adds go after them.

        Raises:
            CannotRemoveError: this backend cannot remove items (the default), before anything changed.
            ValueError: an id that no item has (named), before anything changed.
        """
        raise CannotRemoveError(f"the knn backend {type(self).__name__} cannot remove items")

    @abstractmethod
    def save(self, folder: str | Path) -> None:
        """Write the index (its embeddings or its backend's state, ids, groups, parameters) into ``folder``."""

    @classmethod
    @abstractmethod
    def load(cls, folder: str | Path) -> IKnnIndex:
        """Read an index written by :meth:`save`."""

    @abstractmethod
    def __len__(self) -> int:
        """The number of items added."""


__all__ = ["CannotRemoveError", "IKnnIndex", "KnnSearchResult"]
