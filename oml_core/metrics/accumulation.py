"""``Accumulator``: collect the per-batch values of an epoch (tensors, numpy arrays, lists) and gather them across
DDP processes (OML's ``oml.metrics.accumulation``)::

    acc = Accumulator(keys_to_accumulate=("embeddings", "paths"))
    acc.refresh(num_samples=len(dataset))
    for batch in loader:
        acc.update_data({"embeddings": model(batch["input_tensors"]), "paths": batch["paths"]}, indices=batch["idx"])
    acc = acc.sync()  # every process's rows, each index once, sorted by index
    acc.storage["embeddings"]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from oml_core.ddp.utils import get_world_size_safe, sync_dicts_ddp

#: What an :class:`Accumulator` stores under every key.
TStorage = dict[str, Tensor | np.ndarray | list[Any]]

#: The storage key of the indices given to :meth:`Accumulator.update_data` (OML's).
INDICES_KEY = "__element_indices"


def unique_rows_by_ids(
    ids: Sequence[int], data: Tensor | np.ndarray | Sequence[Any], keep: str = "first"
) -> Any:
    """The rows of ``data`` (one per id) with every id once, sorted by id.

    Args:
        ids: The id of every row of ``data``.
        data: A tensor or array (rows along dim 0), or a list.
        keep: For an id given more than once, the row kept: its ``"first"`` or ``"last"`` occurrence.

    Returns:
        ``data`` reduced to the kept rows, sorted by id, of ``data``'s type (a list for a list or tuple).

    Raises:
        ValueError: ``ids`` and ``data`` differ in length, or ``keep`` is neither ``"first"`` nor ``"last"``.
    """
    if keep not in ("first", "last"):
        raise ValueError(f"keep must be 'first' or 'last', got {keep!r}")
    if len(ids) != len(data):
        raise ValueError(f"got {len(ids)} ids for {len(data)} rows")
    ids_array = np.asarray(ids, dtype=np.int64)
    if keep == "last":  # np.unique gives the first occurrence: look at the rows backwards
        _, positions = np.unique(ids_array[::-1], return_index=True)
        positions = len(ids_array) - 1 - positions
    else:
        _, positions = np.unique(ids_array, return_index=True)
    if isinstance(data, Tensor):
        return data[torch.as_tensor(positions, dtype=torch.long, device=data.device)]
    if isinstance(data, np.ndarray):
        return data[positions]
    return [data[i] for i in positions.tolist()]


class Accumulator:
    """Accumulates the values of several keys, batch by batch, for a known number of samples: tensors (stored on
    the CPU, detached), numpy arrays and lists (or tuples).

    Call :meth:`refresh` with the number of samples to expect, :meth:`update_data` with every batch, then
    :meth:`sync`: it gathers the data of every DDP process and, when indices were given, keeps every index once
    and sorts the rows by index.

    Args:
        keys_to_accumulate: The keys of the values to collect from the dicts given to :meth:`update_data`.

    Raises:
        ValueError: a key is given twice.
    """

    def __init__(self, keys_to_accumulate: tuple[str, ...]) -> None:
        keys = tuple(keys_to_accumulate)
        if len(keys) != len(set(keys)):
            raise ValueError(f"All the keys have to be unique! Got {list(keys)}")
        self.keys_to_accumulate = keys
        self.num_samples: int | None = None
        self._collected_samples = 0
        self._storage: TStorage = {}
        #: OML's attribute name of :data:`INDICES_KEY`.
        self._indices_key = INDICES_KEY

    @property
    def indices_key(self) -> str:
        """The storage key of the indices given to :meth:`update_data` (:data:`INDICES_KEY`)."""
        return self._indices_key

    def refresh(self, num_samples: int) -> None:
        """Forget everything collected and expect ``num_samples`` samples (the memory of the tensors and arrays
        is allocated for them).

        Raises:
            ValueError: ``num_samples`` is not an int >= 1.
        """
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
            raise ValueError(f"num_samples must be an int >= 1, got {num_samples!r}")
        self.num_samples = num_samples
        self._collected_samples = 0
        self._storage = {}

    def update_data(
        self, data_dict: Mapping[str, Any], indices: Sequence[int] | Tensor | np.ndarray | None = None
    ) -> None:
        """Collect the values of :attr:`keys_to_accumulate` of one batch.

        Args:
            data_dict: Values of the same length (the batch size) under every key to accumulate; other keys
                are ignored. ``data_dict`` is not modified.
            indices: The global indices of the batch's samples (in DDP the processes see shuffled shares, and
                padding repeats samples): with them :meth:`sync` keeps every index once, sorted. Give them with
                every batch or with none.

        More samples than ``num_samples`` are accepted (the storage grows), but the storage is then not full
        (:meth:`is_storage_full`), and only ``sync(require_full=False)`` syncs it.

        Raises:
            ValueError: :meth:`refresh` was not called; a key is missing; the values (and indices) differ in
                length; a value's shape (past the batch dim) or type differs
                from the earlier batches'.
            TypeError: a value is not a tensor, numpy array, list or tuple.
            RuntimeError: indices are given with some batches but not with others.
        """
        if self.num_samples is None:
            raise ValueError("the accumulator has no size: call refresh(num_samples) before update_data()")
        missing = [key for key in self.keys_to_accumulate if key not in data_dict]
        if missing:
            raise ValueError(
                f"update_data: the batch has no {missing} (keys_to_accumulate); got {sorted(data_dict)}"
            )
        values = {key: data_dict[key] for key in self.keys_to_accumulate}
        for key, value in values.items():
            if not isinstance(value, Tensor | np.ndarray | list | tuple):
                raise TypeError(
                    f"Type '{type(value).__name__}' of {key!r} is not available for accumulating: give a tensor, "
                    "a numpy array, a list or a tuple"
                )
        tracking = INDICES_KEY in self._storage
        if indices is None:
            if tracking:
                raise RuntimeError("indices were given with the earlier batches, but not with this one")
        else:
            if self._collected_samples > 0 and not tracking:
                raise RuntimeError("indices are given with this batch, but were not with the earlier ones")
            values[INDICES_KEY] = torch.as_tensor(indices).reshape(-1).tolist()
        lengths = {key: len(value) for key, value in values.items()}
        batch_size = next(iter(lengths.values()))
        if any(length != batch_size for length in lengths.values()):
            raise ValueError(f"the values of a batch must have the same length, got {lengths}")
        for key, value in values.items():  # every check before any write: a refused batch changes nothing
            self._check_like_earlier(key, value)
        for key, value in values.items():
            self._put(key, value, batch_size)
        self._collected_samples += batch_size

    def _check_like_earlier(self, key: str, value: Any) -> None:
        """Raise ``ValueError`` when ``value`` is of another type (or row shape) than the earlier batches'."""
        if key not in self._storage:
            return
        stored = self._storage[key]
        if isinstance(value, list | tuple) and isinstance(stored, list):
            return
        row_shape = tuple(value.shape[1:]) if isinstance(value, Tensor | np.ndarray) else None
        if not isinstance(stored, type(value)) or tuple(stored.shape[1:]) != row_shape:
            what = f"a {type(value).__name__}" + (f" of rows {row_shape}" if row_shape is not None else "")
            earlier = f"a {type(stored).__name__}" + (
                f" of rows {tuple(stored.shape[1:])}" if not isinstance(stored, list) else ""
            )
            raise ValueError(f"update_data: {key!r} is {what}, the earlier batches gave {earlier}")

    def _put(self, key: str, value: Any, batch_size: int) -> None:
        start, end = self._collected_samples, self._collected_samples + batch_size
        assert self.num_samples is not None  # update_data checked it
        if isinstance(value, list | tuple):
            stored_list = self._storage.setdefault(key, [])
            assert isinstance(stored_list, list)  # _check_like_earlier
            stored_list.extend(value)
            return
        if key not in self._storage:
            shape = (self.num_samples, *value.shape[1:])
            self._storage[key] = (
                torch.empty(shape, dtype=value.dtype)
                if isinstance(value, Tensor)
                else np.empty(shape, dtype=value.dtype)
            )
        stored = self._storage[key]
        assert not isinstance(stored, list)  # _check_like_earlier
        if len(stored) < end:  # more samples than num_samples: grow the storage
            stored = self._storage[key] = _grown(stored, max(end, 2 * len(stored)))
        stored[start:end] = value.detach().cpu() if isinstance(value, Tensor) else value

    @property
    def storage(self) -> TStorage:
        """The collected values by key (tensors and arrays of ``num_samples`` rows, of which the first
        :attr:`collected_samples` are filled); the indices under :data:`INDICES_KEY`, when given."""
        return self._storage

    @property
    def collected_samples(self) -> int:
        """The number of samples collected since :meth:`refresh`."""
        return self._collected_samples

    def is_storage_full(self) -> bool:
        """True when ``num_samples`` samples have been collected."""
        return self.num_samples == self._collected_samples

    def sync(self, *, require_full: bool = True, keep: Literal["first", "last"] = "first") -> Accumulator:
        """Gather the data of every process (``torch.distributed`` with more than one process; every process
        must call it) and, when indices were given, keep every index once (its first occurrence, rank 0's
        first in DDP) and sort the samples by index.

        Args:
            require_full: Refuse to sync before ``num_samples`` samples are collected (OML's rule). ``False``
                syncs the samples collected so far: for a caller that checks completeness after the gathering
                (``EmbeddingMetrics``: every dataset index, whatever each process collected).
            keep: For an index collected more than once, keep its ``"first"`` (OML's) or ``"last"`` occurrence.

        Returns:
            A new, full accumulator of the gathered samples; ``self`` when there is nothing to gather, order or
            deduplicate (one process, no indices) and it is full.

        Raises:
            ValueError: ``require_full`` and not every sample was collected; the processes accumulate other
                keys or types (from :func:`~oml_core.ddp.utils.sync_dicts_ddp`).
        """
        if require_full and not self.is_storage_full():
            raise ValueError(
                f"Cannot sync. Collected: {self._collected_samples}/{self.num_samples} items: call update_data() "
                "until num_samples samples are collected"
            )
        storage: TStorage = {
            key: _filled(value, self._collected_samples) for key, value in self._storage.items()
        }
        world_size = get_world_size_safe()
        gathered = world_size > 1
        if gathered:
            storage = sync_dicts_ddp(storage, world_size=world_size, device="cpu")
        indices = storage.get(INDICES_KEY)
        if indices is not None:
            storage = {key: unique_rows_by_ids(indices, value, keep) for key, value in storage.items()}  # type: ignore[arg-type]
        elif not gathered and self.is_storage_full():
            return self
        synced = Accumulator(self.keys_to_accumulate)
        n_samples = len(next(iter(storage.values()))) if storage else 0
        synced.num_samples = n_samples
        synced._storage = storage
        synced._collected_samples = n_samples
        return synced


def _grown(value: Tensor | np.ndarray, n_rows: int) -> Tensor | np.ndarray:
    """``value`` in a storage of ``n_rows`` rows (its rows first, the rest uninitialised)."""
    shape = (n_rows, *value.shape[1:])
    if isinstance(value, Tensor):
        grown_tensor = torch.empty(shape, dtype=value.dtype)
        grown_tensor[: len(value)] = value
        return grown_tensor
    grown_array = np.empty(shape, dtype=value.dtype)
    grown_array[: len(value)] = value
    return grown_array


def _filled(value: Tensor | np.ndarray | list[Any], n: int) -> Tensor | np.ndarray | list[Any]:
    """The first ``n`` rows of a stored value (the rows collected so far)."""
    return value if len(value) == n else value[:n]


__all__ = ["INDICES_KEY", "Accumulator", "TStorage", "unique_rows_by_ids"]
