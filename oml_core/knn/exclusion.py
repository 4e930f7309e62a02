"""The exclusion of the backends that cannot mask inside their search (faiss's): fetch more, then filter out
the items of each query's excluded group (:func:`search_excluding`); and the padded ``[Q, k]`` rows every
backend returns."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from oml_core.knn.blocks import STRIP_ROWS
from oml_core.knn.groups import group_sizes
from oml_core.utils.misc_torch import iter_chunks
from oml_core.utils.ragged import Ragged

#: ``raw(queries, k) -> (distances [Q, k'], positions [Q, k'])``: a backend's own search without exclusion,
#: rows by ascending distance, positions (``0..n-1``, in add order) ``-1`` where nothing was found.
RawSearch = Callable[[Tensor, int], tuple[Tensor, Tensor]]


def pad_to(distances: Tensor, positions: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Rows padded (``inf``, ``-1``) or cut to ``k`` columns."""
    n, width = positions.shape
    if width >= k:
        return distances[:, :k], positions[:, :k]
    fill_d = torch.full((n, k - width), float("inf"), dtype=distances.dtype)
    fill_p = torch.full((n, k - width), -1, dtype=torch.long)
    return torch.cat([distances, fill_d], 1), torch.cat([positions, fill_p], 1)


def search_excluding(
    raw: RawSearch, queries: Tensor, k: int, groups: Tensor, exclude: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Up to ``k`` nearest items per query, none of whose group is the query's ``exclude``, from a backend
    search that cannot mask: over-fetch, then filter.

    Queries go in chunks of :data:`~oml_core.knn.blocks.STRIP_ROWS`. For a chunk, ``k + m`` items are
    fetched, ``m`` being the largest number of items any of its queries must leave out (its group's size), so
    an exact ``raw`` always yields ``k`` retrievable items when there are that many; an approximate one may
    yield fewer (the row is then padded). The kept items keep ``raw``'s order.

    Args:
        raw: The backend's search (see :data:`RawSearch`).
        queries: ``[Q, dim]``.
        k: Items per query.
        groups: ``[n]`` group of every item, by position.
        exclude: ``[Q]`` group left out for every query; ``None``: nothing is left out.

    Returns:
        ``([Q, k] distances, [Q, k] positions)``, padded with ``inf`` and ``-1``.
    """
    n = len(groups)
    if exclude is None:
        return pad_to(*raw(queries, min(k, n)), k) if n else pad_to(*empty_rows(len(queries)), k)
    sizes = group_sizes(groups, exclude)
    out_d, out_p = [], []
    for rows in iter_chunks(len(queries), STRIP_ROWS):
        fetch = min(n, k + int(sizes[rows].max())) if n else 0
        if fetch == 0:
            d, p = empty_rows(rows.stop - rows.start)
        else:
            d, p = raw(queries[rows], fetch)
            excluded = (p < 0) | (groups[p.clamp(min=0)] == exclude[rows, None])
            order = torch.sort(
                excluded.to(torch.int8), dim=1, stable=True
            ).indices  # kept first, in raw's order
            d, p = torch.gather(d, 1, order), torch.gather(p, 1, order)
            kept = torch.gather(~excluded, 1, order)
            d, p = d.masked_fill(~kept, float("inf")), p.masked_fill(~kept, -1)
        d, p = pad_to(d, p, k)
        out_d.append(d)
        out_p.append(p)
    return torch.cat(out_d), torch.cat(out_p)


def empty_rows(n_queries: int) -> tuple[Tensor, Tensor]:
    """``([n_queries, 0] distances, [n_queries, 0] positions)``: nothing found for any query."""
    return torch.empty(n_queries, 0), torch.empty(n_queries, 0, dtype=torch.long)


def ragged_to_padded(distances: Ragged, positions: Ragged, k: int) -> tuple[Tensor, Tensor]:
    """``[Q, k]`` tensors (distances, int64 positions) of ragged rows of at most ``k``, padded with ``inf``
    and ``-1``."""
    return pad_to(distances.padded(k, fill=float("inf")), positions.padded(k, fill=-1), k)


__all__ = ["RawSearch", "empty_rows", "pad_to", "ragged_to_padded", "search_excluding"]
