"""``Ragged``: a sequence of 1-D tensors of different lengths, stored as one flat tensor and the lengths."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import overload

import torch
from torch import Tensor

#: Rows examined at once by :meth:`Ragged.first_repeat` (bounds its temporary memory).
REPEAT_CHUNK_ROWS = 2**16


def _as_lengths(values: Tensor | Sequence[int], name: str, n: int | None) -> Tensor:
    """``values`` as a 1-D CPU LongTensor of non-negative integers (``n`` of them when given)."""
    t = torch.as_tensor(values).detach().cpu()
    if t.ndim != 1 or (t.numel() and (t.dtype.is_floating_point or t.dtype == torch.bool)):
        raise ValueError(
            f"{name} must be a 1-D sequence of integers, got {t.dtype} of shape {tuple(t.shape)}"
        )
    if n is not None and len(t) != n:
        raise ValueError(f"{name} must have one entry per row ({n}), got {len(t)}")
    if t.numel() and int(t.min()) < 0:
        raise ValueError(f"{name} must be non-negative, got {int(t.min())}")
    return t.long()


class Ragged(Sequence[Tensor]):
    """``n`` 1-D tensors of different lengths (the items retrieved for every query, their distances, their
    ground truth, ...) held as one flat tensor ``values`` and the ``[n]`` ``lengths``.

    It is a ``Sequence`` of 1-D tensors: ``ragged[i]`` is a view of ``values`` (no copy), ``ragged[a:b]`` a
    ``Ragged`` viewing the same values, and iterating or ``tuple(ragged)`` gives every row at once (one
    ``torch.split``, kept). Whole-sequence work goes through the flat tensor, without a Python loop over rows:
    :meth:`padded`, :meth:`row_ids`, :meth:`truncate`. Compared with a tuple of ``n`` tensors, it costs two
    tensors instead of ``n`` tensor objects (a few hundred bytes and microseconds each), which matters for
    100k queries.

    Treat it as immutable: the rows are views of ``values``, and results built from a ``Ragged`` may share it.

    Args:
        values: The rows, concatenated (1-D).
        lengths: ``[n]`` non-negative lengths of the rows (any integer sequence; kept as a CPU LongTensor).

    Raises:
        ValueError: ``values`` not 1-D, ``lengths`` not 1-D non-negative integers, or not summing to
            ``len(values)``.

    Example:
        >>> r = Ragged(torch.tensor([4, 0, 2, 7]), [3, 0, 1])
        >>> r[0], len(r[1]), r.padded(fill=-1)
        (tensor([4, 0, 2]), 0, tensor([[ 4,  0,  2], [-1, -1, -1], [ 7, -1, -1]]))
    """

    __slots__ = ("values", "lengths", "_offsets", "_rows")

    def __init__(self, values: Tensor, lengths: Tensor | Sequence[int]) -> None:
        lengths_t = _as_lengths(lengths, "lengths", None)
        if values.ndim != 1:
            raise ValueError(f"values must be 1-D, got shape {tuple(values.shape)}")
        if int(lengths_t.sum()) != len(values):
            raise ValueError(f"lengths sum to {int(lengths_t.sum())} but there are {len(values)} values")
        self.values = values
        self.lengths = lengths_t
        self._offsets: Tensor | None = None
        self._rows: tuple[Tensor, ...] | None = None

    # ------------------------------------------------------------------------------------ building
    @classmethod
    def from_tensors(cls, rows: Sequence[Tensor] | Ragged, dtype: torch.dtype | None = None) -> Ragged:
        """``rows`` as a ``Ragged`` (of ``dtype`` when given): a ``Ragged`` is returned as it is (converted
        when its dtype differs), anything else is concatenated (elements may be lists or arrays).

        Raises:
            ValueError: an element is not 1-D; the message names its index.
        """
        if isinstance(rows, Ragged):
            return rows if dtype in (None, rows.values.dtype) else Ragged(rows.values.to(dtype), rows.lengths)
        tensors: list[Tensor] = []
        for i, row in enumerate(rows):
            t = row if isinstance(row, Tensor) else torch.as_tensor(row)
            if t.ndim != 1:
                raise ValueError(f"element {i} must be a 1-D tensor, got shape {tuple(t.shape)}")
            tensors.append(t)
        lengths = torch.tensor([len(t) for t in tensors], dtype=torch.long)
        values = torch.cat(tensors) if tensors else torch.zeros(0)
        if dtype is not None:
            values = values.to(dtype)
        ragged = cls(values, lengths)
        if tensors and dtype in (None, values.dtype) and all(t.dtype == values.dtype for t in tensors):
            ragged._rows = tuple(tensors)
        return ragged

    @classmethod
    def empty(cls, n: int, dtype: torch.dtype = torch.float32) -> Ragged:
        """``n`` empty rows."""
        return cls(torch.zeros(0, dtype=dtype), torch.zeros(n, dtype=torch.long))

    # ------------------------------------------------------------------------------------- sequence
    @property
    def offsets(self) -> Tensor:
        """``[n + 1]`` int64: the start of every row in ``values``, and the total length last."""
        if self._offsets is None:
            self._offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(self.lengths, 0)])
        return self._offsets

    def __len__(self) -> int:
        return len(self.lengths)

    @overload
    def __getitem__(self, index: int) -> Tensor: ...

    @overload
    def __getitem__(self, index: slice) -> Ragged: ...

    def __getitem__(self, index: int | slice) -> Tensor | Ragged:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return Ragged.from_tensors(self.tensors()[index], self.values.dtype)
            stop = max(start, stop)
            first, last = int(self.offsets[start]), int(self.offsets[stop])
            return Ragged(self.values[first:last], self.lengths[start:stop])
        i, n = operator.index(index), len(self)
        if not -n <= i < n:
            raise IndexError(f"row {i} out of range for {n} rows")
        i %= n
        if self._rows is not None:
            return self._rows[i]
        return self.values[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def __iter__(self) -> Iterator[Tensor]:
        return iter(self.tensors())

    def tensors(self) -> tuple[Tensor, ...]:
        """Every row as a 1-D tensor (views of ``values``; computed once)."""
        if self._rows is None:
            self._rows = torch.split(self.values, self.lengths.tolist())
        return self._rows

    def __repr__(self) -> str:
        shown = ", ".join(repr(row) for row in self[:3])
        more = f", ... ({len(self)} rows)" if len(self) > 3 else ""
        return f"Ragged([{shown}{more}])"

    # ------------------------------------------------------------------------------ whole-sequence ops
    def row_ids(self) -> Tensor:
        """``[len(values)]`` int64: the row of every value (on the device of ``values``)."""
        rows = torch.arange(len(self), device=self.values.device)
        return torch.repeat_interleave(rows, self.lengths.to(self.values.device))

    def valid_mask(self, width: int) -> Tensor:
        """``[n, width]`` bool: ``True`` at ``[i, j]`` when row ``i`` has a ``j``-th value."""
        positions = torch.arange(width, device=self.values.device)
        return positions[None, :] < self.lengths.to(self.values.device)[:, None]

    def padded(self, max_len: int | None = None, fill: float | bool = 0) -> Tensor:
        """``[n, K]``: row ``i`` is ``self[i][:K]`` followed by ``fill``; ``K`` is the longest row's length,
        capped at ``max_len`` when given. One gather, no loop over rows."""
        longest = int(self.lengths.max()) if len(self) else 0
        width = longest if max_len is None else max(0, min(int(max_len), longest))
        valid = self.valid_mask(width)
        if width == 0 or self.values.numel() == 0:
            return torch.full((len(self), width), fill, dtype=self.values.dtype, device=self.values.device)
        starts = self.offsets[:-1].to(self.values.device)
        index = (starts[:, None] + torch.arange(width, device=self.values.device)[None, :]).masked_fill(
            ~valid, 0
        )
        return self.values[index].masked_fill(~valid, fill)

    def truncate(self, n_keep: Tensor | Sequence[int]) -> Ragged:
        """A ``Ragged`` whose row ``i`` is ``self[i][:n_keep[i]]`` (``n_keep`` clipped to the row lengths).

        Raises:
            ValueError: ``n_keep`` not one non-negative integer per row.
        """
        keep = torch.minimum(_as_lengths(n_keep, "n_keep", len(self)), self.lengths)
        if torch.equal(keep, self.lengths):
            return self
        position = torch.arange(len(self.values)) - self.offsets[:-1].repeat_interleave(self.lengths)
        mask = position < keep.repeat_interleave(self.lengths)
        return Ragged(self.values[mask.to(self.values.device)], keep)

    def first_repeat(self) -> tuple[int, int] | None:
        """The first row (lowest index) holding a value more than once, and the smallest value it repeats:
        ``(row, value)``, or ``None`` when every row's values are distinct. Integer values only.

        Vectorised, :data:`REPEAT_CHUNK_ROWS` rows at a time: each row is sorted and compared with itself shifted
        by one. Rows of similar lengths are padded into a ``[rows, longest]`` matrix and sorted along it (one
        ``sort(dim=1)``); rows of very different lengths, whose padding would cost more than twice their values,
        are sorted together by ``(row, value)`` (two stable sorts of the flat values).

        Raises:
            TypeError: the values are not integers.
        """
        if (
            self.values.dtype.is_floating_point
            or self.values.dtype.is_complex
            or self.values.dtype == torch.bool
        ):
            raise TypeError(f"first_repeat needs integer values, got {self.values.dtype}")
        for start in range(0, len(self), REPEAT_CHUNK_ROWS):
            found = self[start : start + REPEAT_CHUNK_ROWS]._first_repeat_in_chunk()
            if found is not None:
                return start + found[0], found[1]
        return None

    def _first_repeat_in_chunk(self) -> tuple[int, int] | None:
        """:meth:`first_repeat` of all the rows at once."""
        width = int(self.lengths.max()) if len(self) else 0
        if width < 2:
            return None
        if len(self) * width <= 2 * len(self.values) + len(self):
            if bool((self.lengths == width).all()):  # rows of one length: a view, no padding
                ordered = torch.sort(self.values.reshape(len(self), width), dim=1).values
                repeated = ordered[:, 1:] == ordered[:, :-1]
            else:
                # the largest value as padding sorts after a row's own values (or ties with them), so the first
                # ``length`` sorted entries of every row are its values
                ordered = torch.sort(self.padded(fill=torch.iinfo(self.values.dtype).max), dim=1).values
                repeated = (ordered[:, 1:] == ordered[:, :-1]) & self.valid_mask(width)[:, 1:]
            if not bool(repeated.any()):
                return None
            row = int(repeated.any(dim=1).nonzero()[0, 0])
            column = int(repeated[row].nonzero()[0, 0])
            return row, int(ordered[row, column])
        rows = self.row_ids()
        by_value = torch.sort(self.values, stable=True).indices
        order = by_value[torch.sort(rows[by_value], stable=True).indices]
        values, rows = self.values[order], rows[order]
        repeated_flat = (values[1:] == values[:-1]) & (rows[1:] == rows[:-1])
        if not bool(repeated_flat.any()):
            return None
        position = int(repeated_flat.nonzero()[0, 0])
        return int(rows[position]), int(values[position])

    def to(self, *args, **kwargs) -> Ragged:
        """``Ragged(values.to(*args, **kwargs), lengths)`` (``self`` when nothing changes)."""
        values = self.values.to(*args, **kwargs)
        return self if values is self.values else Ragged(values, self.lengths)

    def clone(self) -> Ragged:
        """A copy that shares nothing with ``self``."""
        return Ragged(self.values.clone(), self.lengths.clone())


__all__ = ["Ragged"]
