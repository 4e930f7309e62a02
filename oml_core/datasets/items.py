"""What the pipelines take of a dataset's items: a dict holding the extractor's input (:data:`ItemInput`: a tensor, or
named tensors), the item's index and, in a labelled dataset, its label; and the check of a dataset's first item
against it (:func:`first_item_problem`), which the pipelines run on every dataset a dataset component gives them
before any model does."""

from __future__ import annotations

from collections.abc import Mapping, Sized
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor

from oml_core.interfaces.datasets import IBaseDataset, ILabeledDataset
from oml_core.utils.rng_state import get_rng_state, set_rng_state

#: What an extractor takes for one item: a tensor, or named tensors (e.g. a text's ids and mask).
ItemInput = Tensor | Mapping[str, Tensor]


def is_item_input(value: Any) -> bool:
    """Whether ``value`` is an :data:`ItemInput` (what ``embeddings.pt`` can keep with ``weights_only``)."""
    if isinstance(value, Tensor):
        return True
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, Tensor) for k, v in value.items()
    )


def first_item_problem(dataset: IBaseDataset) -> str | None:
    """What is wrong with the first item of ``dataset`` as the pipelines read it (None: nothing, or no item): a
    dict holding an :data:`ItemInput` under ``input_tensors_key``, its index under ``index_key`` and, for an
    :class:`~oml_core.interfaces.datasets.ILabeledDataset`, its label under ``labels_key``, both ints (a Python or
    numpy integer, or a 0-d integer tensor). The item is read with the random state kept as it was (its random
    transforms draw nothing of the run's).

    Returns:
        The problem, after ``item 0 of <the dataset>``: ``is a tuple, not a dict of ...``, ``has no key 'labels'
        (its keys: ...)``, ``holds a list under 'input_tensors', not ...``, ``holds 'a' (str) under 'labels', not
        an int``.
    """
    if len(cast(Sized, dataset)) == 0:
        return None
    state = get_rng_state({})
    try:
        item = dataset[0]
    finally:
        set_rng_state(state, {})
    if not isinstance(item, Mapping):
        return f"is a {type(item).__name__}, not a dict of its input, index and label"
    keys = [dataset.input_tensors_key, dataset.index_key]
    if isinstance(dataset, ILabeledDataset):
        keys.append(dataset.labels_key)
    missing = [key for key in keys if key not in item]
    if missing:
        return f"has no key {missing[0]!r} (its keys: {', '.join(map(repr, item)) or 'none'})"
    given = item[dataset.input_tensors_key]
    if not is_item_input(given):
        return (
            f"holds a {type(given).__name__} under {dataset.input_tensors_key!r}, not a tensor or a dict of "
            f"tensors"
        )
    for key in keys[1:]:
        if not is_int(item[key]):
            return f"holds {item[key]!r} ({type(item[key]).__name__}) under {key!r}, not an int"
    return None


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer: a Python or numpy integer (not a bool), or a 0-d integer tensor."""
    if isinstance(value, Tensor):
        return value.ndim == 0 and not (
            value.is_floating_point() or value.is_complex() or value.dtype == torch.bool
        )
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


__all__ = ["ItemInput", "first_item_problem", "is_int", "is_item_input"]
