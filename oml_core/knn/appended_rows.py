"""The columns of a knn backend's items (embeddings, ids, groups), appended batch by batch."""

from __future__ import annotations

import torch
from torch import Tensor


class AppendedRows:
    """Tensors appended batch by batch along their first dimension and concatenated once, when read: the
    columns of an index's items (embeddings, ids, groups) in add order.

    Args:
        empty: What :attr:`rows` is before anything is appended (e.g. ``torch.empty(0, dtype=torch.long)``).
    """

    def __init__(self, empty: Tensor) -> None:
        self._empty = empty
        self._parts: list[Tensor] = []

    def __len__(self) -> int:
        return sum(len(part) for part in self._parts)

    def append(self, rows: Tensor) -> None:
        """Append a batch of rows."""
        self._parts.append(rows)

    def keep(self, kept: Tensor) -> None:
        """Keep only the rows where the ``[len(self)]`` bool mask ``kept`` is true, in their order."""
        self._parts = [self.rows[kept]]

    @property
    def parts(self) -> tuple[Tensor, ...]:
        """The batches as appended (not concatenated): what is written part by part."""
        return tuple(self._parts)

    @property
    def width(self) -> int | None:
        """The size of the second dimension of the rows (``None`` before any, or for 1-D rows)."""
        return self._parts[0].shape[1] if self._parts and self._parts[0].ndim > 1 else None

    @property
    def rows(self) -> Tensor:
        """Every row appended, in order (the batches are concatenated on the first read after an append)."""
        if len(self._parts) > 1:
            self._parts = [torch.cat(self._parts)]
        return self._parts[0] if self._parts else self._empty


class AppendedItems:
    """What every knn backend that keeps its items' ids and exclusion groups in add order shares: ``__len__``,
    ``ids`` and ``groups`` read from its :class:`AppendedRows` ``_ids`` and ``_groups`` (put it before
    :class:`~oml_core.interfaces.knn.IKnnIndex` in the bases)."""

    _ids: AppendedRows
    _groups: AppendedRows

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> Tensor:
        """``[n]`` int64 ids of the items, in add order."""
        return self._ids.rows

    @property
    def groups(self) -> Tensor:
        """``[n]`` int64 exclusion groups of the items, in add order."""
        return self._groups.rows


__all__ = ["AppendedItems", "AppendedRows"]
