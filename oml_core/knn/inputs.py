"""The checks of what the kNN search is given: the embeddings, and per-item integer codes (labels, sequence
ids)."""

from __future__ import annotations

from typing import overload

import torch
from torch import Tensor

from oml_core.knn.distances import compute_dtype
from oml_core.utils.checks import as_int_tensor


def check_embeddings(embeddings: Tensor, name: str) -> Tensor:
    """``embeddings`` when it is a ``[n, dim]`` tensor of finite values (integers converted to float32).

    Raises:
        ValueError: another shape or a non-finite entry; the message names ``name`` and the row.
    """
    if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
        shape = tuple(embeddings.shape) if isinstance(embeddings, Tensor) else type(embeddings).__name__
        raise ValueError(f"{name} must be a [n, dim] tensor, got {shape}")
    if not embeddings.dtype.is_floating_point:
        embeddings = embeddings.float()
    # every entry is finite when every row's sum is (20x faster to check than isfinite(x).all(1)); a sum that
    # overflows on finite entries is told apart by the exact check, which runs only then
    if bool(torch.isfinite(embeddings.sum(dim=1, dtype=compute_dtype(embeddings.dtype))).all()):
        return embeddings
    finite = torch.isfinite(embeddings).all(dim=1)
    if not bool(finite.all()):
        row = int((~finite).nonzero()[0, 0])
        raise ValueError(f"{name} must be finite, row {row} is not: {embeddings[row][:8].tolist()}")
    return embeddings


@overload
def per_item(values: Tensor, name: str, n_items: int, device: torch.device) -> Tensor: ...


@overload
def per_item(values: None, name: str, n_items: int, device: torch.device) -> None: ...


def per_item(values: Tensor | None, name: str, n_items: int, device: torch.device) -> Tensor | None:
    """``None``, or ``values`` as ``[n_items]`` integer codes (labels, sequence ids): see
    :func:`~oml_core.utils.checks.as_int_tensor`."""
    if values is None:
        return None
    return as_int_tensor(
        values, name, n=n_items, per="embedding", expected="hold integer codes", flatten=True, device=device
    )


__all__ = ["check_embeddings", "per_item"]
