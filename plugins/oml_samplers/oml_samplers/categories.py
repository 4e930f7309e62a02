"""Validation of a ``label2category`` mapping and the grouping of a dataset's labels by category."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from torch import Tensor

from oml_core.utils.errors import OmlValueError
from oml_samplers.labels import group_indices_by_label

Category = str | int


class CategoryIndex(NamedTuple):
    """A dataset's labels grouped by label and by category.

    ``unique_labels[j]`` is the ``j``-th smallest label, ``ids_by_label[j]`` its dataset indices;
    ``categories`` are ordered by their smallest label and ``labels_by_category[c]`` holds the ascending
    positions ``j`` of the labels of ``categories[c]``.
    """

    unique_labels: Tensor
    ids_by_label: list[Tensor]
    categories: list[Category]
    labels_by_category: list[list[int]]


def _listed(values: Iterable[Any], limit: int = 5) -> str:
    values = list(values)
    shown = ", ".join(repr(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _checked_mapping(label2category: Any) -> dict[int, Category]:
    if label2category is None:
        raise ValueError(
            "label2category is None: this sampler needs a mapping from every label to its category "
            "(for a dataset, its 'category' column)"
        )
    if not isinstance(label2category, Mapping):
        raise ValueError(
            f"label2category must be a mapping label -> category, got {type(label2category).__name__}"
        )
    mapping: dict[int, Category] = {}
    for label, category in label2category.items():
        if not _is_int(label):
            raise ValueError(
                f"label2category keys must be int labels, got the key {label!r} ({type(label).__name__})"
            )
        if isinstance(category, str):
            mapping[int(label)] = str(category)
        elif _is_int(category):
            mapping[int(label)] = int(category)
        else:
            raise ValueError(
                f"label2category[{label!r}] must be a str or int category, got {category!r} "
                f"({type(category).__name__})"
            )
    return mapping


def index_categories(labels: Tensor, label2category: Any) -> CategoryIndex:
    """Group the 1-D int tensor ``labels`` by label and by the category ``label2category`` gives each label.

    Raises:
        ValueError: ``label2category`` is not a mapping of int labels to str or int categories, misses a
            label of ``labels``, or holds a label that ``labels`` does not have.
    """
    mapping = _checked_mapping(label2category)
    unique_labels, ids_by_label = group_indices_by_label(labels)
    present = unique_labels.tolist()
    missing = [label for label in present if label not in mapping]
    if missing:
        raise ValueError(f"label2category has no category for the labels {_listed(missing)} found in labels")
    absent = sorted(set(mapping) - set(present))
    if absent:
        raise ValueError(f"label2category holds the labels {_listed(absent)}, which are not in labels")
    positions: dict[Category, list[int]] = {}
    for j, label in enumerate(present):
        positions.setdefault(mapping[label], []).append(j)
    return CategoryIndex(unique_labels, ids_by_label, list(positions), list(positions.values()))


def check_category_sizes(index: CategoryIndex, n_labels: int, hint: str = "") -> None:
    """Raise if a category has fewer than ``n_labels`` unique labels, naming each such category and count.

    Raises:
        OmlValueError: some category has fewer than ``n_labels`` unique labels; the message starts with OML's
            ``All the categories must have at least <n_labels> unique labels``; ``hint`` ends it.
    """
    small = [
        f"the category {category!r} has only {len(positions)}"
        for category, positions in zip(index.categories, index.labels_by_category)
        if len(positions) < n_labels
    ]
    if small:
        shown = ", ".join(small[:5]) + (f" and {len(small) - 5} more categories" if len(small) > 5 else "")
        raise OmlValueError(
            f"All the categories must have at least {n_labels} unique labels (n_labels): {shown}{hint}"
        )
