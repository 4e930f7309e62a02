"""Row-wise gather and scatter on 2-D tensors (OML's ``take_2d`` / ``assign_2d``, also importable from
:mod:`oml_core.utils.misc_torch` as in OML). A bad shape or index is an
:class:`~oml_core.utils.errors.OmlValueError` (a ``ValueError``, and an ``AssertionError`` as OML's asserts)."""

from __future__ import annotations

from torch import Tensor

from oml_core.utils.errors import OmlValueError


def _check_2d(x: Tensor, indices: Tensor) -> None:
    if x.ndim != 2 or indices.ndim != 2 or x.shape[0] != indices.shape[0]:
        raise OmlValueError(
            f"expected x [N, M] and indices [N, P] with the same N, got {tuple(x.shape)} and "
            f"{tuple(indices.shape)}"
        )
    if indices.dtype.is_floating_point or indices.dtype.is_complex:
        raise OmlValueError(f"indices must hold integers, got {indices.dtype}")
    if indices.numel() and (int(indices.min()) < -x.shape[1] or int(indices.max()) >= x.shape[1]):
        raise OmlValueError(f"indices must be within [0, {x.shape[1] - 1}] (the columns of x)")


def take_2d(x: Tensor, indices: Tensor) -> Tensor:
    """Pick ``P`` items from every row: ``output[i, j] = x[i, indices[i, j]]``.

    Args:
        x: Tensor with the shape of ``[N, M]``.
        indices: Integer tensor with the shape of ``[N, P]``; a row may repeat a column (the same element of
            ``x`` is then taken several times). Negative indices count from the end of the row.

    Returns:
        Tensor of the items picked from ``x``, with the shape of ``[N, P]``.

    Example:
        >>> take_2d(torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([[2, 2], [0, 1]]))
        tensor([[3, 3],
                [4, 5]])
    """
    _check_2d(x, indices)
    return x.gather(1, indices.long().remainder(max(x.shape[1], 1)))


def assign_2d(x: Tensor, indices: Tensor, new_values: Tensor) -> Tensor:
    """Write ``P`` values into every row: ``x[i, indices[i, j]] = new_values[i, j]``, in place.

    Args:
        x: Tensor with the shape of ``[N, M]``; modified in place and returned.
        indices: Integer tensor with the shape of ``[N, P]`` where ``P <= M``; columns of a row should be
            distinct (with repeats, which value is written is unspecified, as in ``Tensor.scatter_``).
        new_values: Tensor with the shape of ``[N, P]``.

    Returns:
        ``x``, with the shape of ``[N, M]``.

    Example:
        >>> assign_2d(torch.zeros(2, 3), torch.tensor([[2], [0]]), torch.tensor([[7.0], [8.0]]))
        tensor([[0., 0., 7.],
                [8., 0., 0.]])
    """
    _check_2d(x, indices)
    if new_values.shape != indices.shape:
        raise OmlValueError(
            f"new_values must have the shape of indices {tuple(indices.shape)}, got {tuple(new_values.shape)}"
        )
    return x.scatter_(1, indices.long().remainder(max(x.shape[1], 1)), new_values.to(x.dtype))


__all__ = ["assign_2d", "take_2d"]
