"""The checks that every knn backend (:class:`~oml_core.interfaces.knn.IKnnIndex`) makes the same way: its
distance and ``k``, what :meth:`~oml_core.interfaces.knn.IKnnIndex.add`, ``search`` and ``remove`` are given, and
the file of a saved index."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from oml_core.utils.checks import as_int_tensor, check_int
from oml_core.utils.digest import verify_checkpoint

#: The distances a backend can be asked for.
KNN_DISTANCES = ("l2", "cosine")


def check_distance(distance: str) -> str:
    """``distance`` when it is one of :data:`KNN_DISTANCES`, else a ``ValueError`` naming them."""
    if distance not in KNN_DISTANCES:
        raise ValueError(f"distance must be one of {list(KNN_DISTANCES)}, got {distance!r}")
    return distance


def check_k(k: int) -> int:
    """``k`` when it is a positive integer (not a ``bool``), else a ``ValueError``
    (:func:`~oml_core.utils.checks.check_int`)."""
    return check_int(k, "k")


def load_index_state(path: Path, expected_format: str) -> dict:
    """``torch.load(path, weights_only=True)`` of a saved index, checked to be a dict of ``expected_format``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not a torch file, is corrupt (a ``CorruptCheckpointError``: its digest,
            :func:`~oml_core.utils.digest.verify_checkpoint`), or holds something else; the message names it.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file; is the folder a saved {expected_format} index?")
    verify_checkpoint(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ValueError(f"{path}: not a readable {expected_format} index ({type(e).__name__}: {e})") from e
    if not isinstance(state, dict) or state.get("format") != expected_format:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{path}: not a {expected_format} index (found {found!r})")
    return state


def check_added(
    embeddings: Tensor, ids: Tensor | None, groups: Tensor | None, n_before: int, dim: int | None
) -> tuple[Tensor, Tensor, Tensor]:
    """Validate what :meth:`IKnnIndex.add` is given; fill the default ids (positions) and groups (the ids).

    Raises:
        ValueError: not a finite ``[n, dim]`` float tensor, a dimension other than the index's, ``ids`` or
            ``groups`` of another length or not integers.
    """
    if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
        raise ValueError(
            f"embeddings must be a [n, dim] tensor, got {getattr(embeddings, 'shape', embeddings)!r}"
        )
    if dim is not None and embeddings.shape[1] != dim:
        raise ValueError(f"embeddings have dimension {embeddings.shape[1]}, the index has {dim}")
    if not embeddings.dtype.is_floating_point:
        embeddings = embeddings.float()
    if not bool(torch.isfinite(embeddings).all()):
        row = int((~torch.isfinite(embeddings).all(1)).nonzero()[0, 0])
        raise ValueError(f"embeddings must be finite, row {row} is not")
    n = len(embeddings)
    ids = torch.arange(n_before, n_before + n) if ids is None else _integers(ids, "ids", n)
    groups = ids.clone() if groups is None else _integers(groups, "groups", n)
    return embeddings.detach().cpu(), ids, groups


def kept_after_removal(ids: Tensor, removed: Tensor) -> Tensor:
    """The ``[n]`` bool mask of the items (of ``ids``, ``[n]``) that remain when those of ``removed`` go, for
    :meth:`IKnnIndex.remove <oml_core.interfaces.knn.IKnnIndex.remove>`.

    Raises:
        ValueError: ``removed`` is not integers, or holds an id that no item has (the first few named).
    """
    removed = as_int_tensor(removed, "ids", expected="be integers", flatten=True)
    unknown = removed[~torch.isin(removed, ids)]
    if len(unknown):
        raise ValueError(f"no item has the id(s) {unknown[:5].tolist()}: nothing was removed")
    return ~torch.isin(ids, removed)


def check_queries(queries: Tensor, dim: int | None, exclude: Tensor | None) -> Tensor:
    """Validate what :meth:`IKnnIndex.search` is given (``[Q, dim]`` queries, ``[Q]`` integer ``exclude``)."""
    if not isinstance(queries, Tensor) or queries.ndim != 2:
        raise ValueError(f"queries must be a [Q, dim] tensor, got {getattr(queries, 'shape', queries)!r}")
    if dim is not None and queries.shape[1] != dim:
        raise ValueError(f"queries have dimension {queries.shape[1]}, the index has {dim}")
    if exclude is not None:
        _integers(exclude, "exclude", len(queries))
    return queries.detach().cpu() if queries.dtype.is_floating_point else queries.float().cpu()


def _integers(values: Tensor, name: str, n: int) -> Tensor:
    """``values`` as ``[n]`` integers on the CPU (:func:`~oml_core.utils.checks.as_int_tensor`)."""
    return as_int_tensor(values, name, n=n, expected="be integers", flatten=True)


__all__ = [
    "KNN_DISTANCES",
    "check_added",
    "check_distance",
    "check_k",
    "check_queries",
    "kept_after_removal",
    "load_index_state",
]
