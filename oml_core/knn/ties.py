"""The order of a backend's rows as the exact backend orders them: by ``(distance, position)``, the ties at the
``k``-th place completed by fetching deeper (:func:`search_completing_ties`), for backends whose own search keeps
either end of a tie cut by ``k`` (faiss's heaps, Qdrant's sort)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

#: ``raw(rows, fetch) -> (distances [R, fetch], positions [R, fetch])``: a backend's search of the queries of
#: ``rows`` (``[R]`` indices into the queries), each row sorted by ``(distance, position)`` and padded with
#: ``inf`` and ``-1`` where nothing was found.
RowsSearch = Callable[[Tensor, int], tuple[Tensor, Tensor]]


def sorted_by_distance_then_position(distances: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
    """Every row sorted by ``(distance, position)``: a sort by position, then a stable sort by distance."""
    by_position = torch.argsort(positions, dim=1)
    distances, positions = distances.gather(1, by_position), positions.gather(1, by_position)
    by_distance = torch.sort(distances, dim=1, stable=True).indices
    return distances.gather(1, by_distance), positions.gather(1, by_distance)


def tied_rows(distances: Tensor, k: int, fetch: int) -> Tensor:
    """The rows whose ``k``-th distance is finite and equal to their last (``fetch``-th) one."""
    kth, last = distances[:, k - 1], distances[:, fetch - 1]
    return torch.nonzero((kth == last) & torch.isfinite(kth)).squeeze(1)


def search_completing_ties(raw: RowsSearch, n_queries: int, k: int, n: int) -> tuple[Tensor, Tensor]:
    """``raw``'s ``k`` nearest of every query with the ties at the ``k``-th place completed: ``k + 1`` are
    fetched, and the rows whose last fetched distance equals their (finite) ``k``-th are fetched again, twice as
    deep, until it is larger or all ``n`` items are fetched. In an exact search every item at the ``k``-th
    distance is then among the fetched, and the lowest positions are kept: the exact backend's order.

    Returns:
        ``([Q, min(k, n)] distances, [Q, min(k, n)] positions)``, as ``raw`` gives them.
    """
    fetch = min(k + 1, n)
    distances, positions = raw(torch.arange(n_queries), fetch)
    if fetch <= k:
        return distances, positions
    open_rows = tied_rows(distances, k, fetch)
    distances, positions = distances[:, :k].clone(), positions[:, :k].clone()
    while len(open_rows) and fetch < n:
        fetch = min(2 * fetch, n)
        d, p = raw(open_rows, fetch)
        distances[open_rows], positions[open_rows] = d[:, :k], p[:, :k]
        open_rows = open_rows[tied_rows(d, k, fetch)]
    return distances, positions


__all__ = ["RowsSearch", "search_completing_ties", "sorted_by_distance_then_position", "tied_rows"]
