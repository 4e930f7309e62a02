"""``extra_data``, OML's per-item records of a dataset (``extra_data={"embeddings": embeddings}``): checked once
when the dataset is made, and put into each item under their keys. Every modality's base dataset uses it."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np


def checked_extra_data(
    extra_data: Mapping[str, Collection[Any]] | None,
    n_items: int,
    reserved: Collection[str],
    owner: str,
    noun: str,
) -> dict[str, list[Any]]:
    """The records of ``extra_data`` as lists, each checked to hold one value per item.

    Args:
        extra_data: ``{key: record}``, ``record[i]`` the value of item ``i`` (None: no records).
        n_items: The dataset's number of items.
        reserved: The keys the dataset's items use themselves.
        owner: The dataset, as messages name it.
        noun: What the items are, as messages count them (``paths``, ``texts``).

    Raises:
        ValueError: a record of another length (``<owner>: extra_data['w'] has 2 values for 3 paths``), or a key
            among ``reserved``.
    """
    checked: dict[str, list[Any]] = {}
    for key, record in (extra_data or {}).items():
        values = list(record)
        if len(values) != n_items:
            raise ValueError(f"{owner}: extra_data['{key}'] has {len(values)} values for {n_items} {noun}")
        if key in reserved:
            raise ValueError(f"{owner}: the extra_data key '{key}' clashes with a key the dataset uses")
        checked[key] = values
    return checked


def add_extra_data(data: dict[str, Any], extra_data: Mapping[str, list[Any]], item: int) -> dict[str, Any]:
    """``data`` (the item ``item``) with the value of ``item`` of every record, numpy scalars as Python ones."""
    for key, values in extra_data.items():
        value = values[item]
        data[key] = value.item() if isinstance(value, np.generic) else value
    return data


__all__ = ["add_extra_data", "checked_extra_data"]
