"""Torch helpers shared by the core and the plugins (distances, chunking, finding non-finite weights).

The Euclidean distance is computed in one place, :func:`l2_dist_mm` (one matrix multiply of
:func:`l2_factors`, then :func:`l2_from_squared_`): :func:`pairwise_dist`, the k-nearest-neighbour search
(:mod:`oml_core.knn.blocks`, block by block) and the differentiable :func:`pairwise_l2` of the losses
(:func:`pairwise_l2`, exported by oml-losses) all go through it. :func:`elementwise_dist` is the distance of paired rows
(``[n]``, not a matrix).

OML's other names of ``oml.utils.misc_torch`` are here too, under OML's names and signatures: ``take_2d`` /
``assign_2d`` (from :mod:`oml_core.utils.indexing`), :func:`normalise`, :func:`is_sorted_tensor`,
:func:`cat_two_sorted_tensors_and_keep_it_sorted`, :func:`unique_by_ids`, :func:`get_device`,
:func:`temporary_setting_model_mode` and the online statistics (:class:`AvgOnline`, :class:`OnlineAvgDict`, ...).

``PCA`` is importable from here too, as in OML (``from oml_core.utils.misc_torch import PCA``); it lives in
:mod:`oml_core.utils.pca`, which imports this module, so it is exported lazily.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from oml_core.utils.errors import OmlValueError
from oml_core.utils.indexing import assign_2d as assign_2d
from oml_core.utils.indexing import take_2d as take_2d
from oml_core.utils.lazy import lazy_exports
from oml_core.utils.precision import full_precision, to_full_precision

__getattr__, __dir__ = lazy_exports(__name__, {"PCA": "oml_core.utils.pca"})

#: Norms below this are clamped when dividing by them (zero vectors get cosine distance 1 to everything).
NORM_EPS = 1e-12
#: Rows processed at once by the per-row statistics (bounds their temporary memory).
ROWS_CHUNK = 2**14
#: :func:`pairwise_l2` recomputes a pair exactly when ``|a - b|^2 <= CLOSE_RATIO * (|a|^2 + |b|^2)`` (norms of
#: the centred rows).
CLOSE_RATIO = 0.1
#: Feature values held at once by :func:`pairwise_l2` while recomputing the close pairs (bounds their memory).
PAIRS_CHUNK_VALUES = 2**22


def elementwise_dist(x1: Tensor, x2: Tensor, p: int = 2) -> Tensor:
    """Distances between the rows of equally shaped ``x1`` and ``x2``: ``||x1[i] - x2[i]||_p`` -> ``[n]``."""
    if x1.shape != x2.shape or x1.ndim != 2:
        raise ValueError(
            f"expected two [n, d] tensors of one shape, got {tuple(x1.shape)} and {tuple(x2.shape)}"
        )
    return torch.linalg.vector_norm(x1 - x2, ord=p, dim=1)


def _check_pair(x1: Tensor, x2: Tensor) -> None:
    if x1.ndim != 2 or x2.ndim != 2 or x1.shape[1] != x2.shape[1]:
        raise ValueError(f"expected [n, d] and [m, d] tensors, got {tuple(x1.shape)} and {tuple(x2.shape)}")


def squared_norms(x: Tensor) -> Tensor:
    """``|x_i|^2`` of every row of ``x`` ``[n, d]``: ``[n]`` (the statistic of :func:`l2_factors`).

    Summed squares (exact for small integers, unlike a squared norm), in chunks of :data:`ROWS_CHUNK` rows so
    that no copy of ``x`` is made (``x`` may be a memory-mapped file); without autograd through one buffer, as no
    chunk-sized block should be allocated more than once (a new one per chunk can grow the C allocator's heap by
    the size of ``x``)."""
    if not len(x):
        return x.new_zeros(0)
    if x.requires_grad and torch.is_grad_enabled():  # differentiable: no out= tensors
        return torch.cat([(rows * rows).sum(dim=1) for rows in x.split(ROWS_CHUNK)])
    result = x.new_empty(len(x))
    buffer = x.new_empty(min(len(x), ROWS_CHUNK), x.shape[1])
    for start in range(0, len(x), ROWS_CHUNK):
        rows = x[start : start + ROWS_CHUNK]
        torch.sum(
            torch.mul(rows, rows, out=buffer[: len(rows)]), dim=1, out=result[start : start + len(rows)]
        )
    return result


def inverse_norms(x: Tensor) -> Tensor:
    """``1 / max(|x_i|, NORM_EPS)`` of every row of ``x`` ``[n, d]``: ``[n]`` (the statistic of
    :func:`cosine_factors`)."""
    return torch.linalg.vector_norm(x, dim=1).clamp_(min=NORM_EPS).reciprocal_()


def l2_factors(x: Tensor, query: bool, sq: Tensor | None = None, out: Tensor | None = None) -> Tensor:
    """``[n, d + 2]`` factors whose dot products are squared Euclidean distances, so that one matrix multiply
    gives them: a query row ``a`` becomes ``[-2a, |a|^2, 1]``, a gallery row ``b`` becomes ``[b, 1, |b|^2]``,
    and ``[-2a, |a|^2, 1] . [b, 1, |b|^2] = |a|^2 + |b|^2 - 2 a.b = |a - b|^2``.

    Args:
        x: ``[n, d]`` rows.
        query: Which side ``x`` is.
        sq: ``squared_norms(x)`` when already known.
        out: A ``[n, d + 2]`` tensor to write into.
    """
    sq = squared_norms(x) if sq is None else sq
    out = x.new_empty(len(x), x.shape[1] + 2) if out is None else out
    d = x.shape[1]
    if query:
        torch.mul(x, -2.0, out=out[:, :d])  # scaling by -2 is exact
        out[:, d], out[:, d + 1] = sq, 1.0
    else:
        out[:, :d] = x
        out[:, d], out[:, d + 1] = 1.0, sq
    return out


def cosine_factors(x: Tensor, query: bool, inv: Tensor | None = None, out: Tensor | None = None) -> Tensor:
    """``[n, d + 1]`` factors whose dot products are cosine distances: a query row ``a`` becomes
    ``[-a / |a|, 1]``, a gallery row ``b`` becomes ``[b / |b|, 1]``; their product is ``1 - cos(a, b)``.

    Args:
        x: ``[n, d]`` rows.
        query: Which side ``x`` is.
        inv: ``inverse_norms(x)`` when already known.
        out: A ``[n, d + 1]`` tensor to write into.
    """
    inv = inverse_norms(x) if inv is None else inv
    out = x.new_empty(len(x), x.shape[1] + 1) if out is None else out
    d = x.shape[1]
    torch.mul(x, (-inv if query else inv)[:, None], out=out[:, :d])
    out[:, d] = 1.0
    return out


def l2_dist_mm(x1: Tensor, x2: Tensor, out: Tensor | None = None, squared: bool = False) -> Tensor:
    """Euclidean distances ``[n, m]`` between the rows of ``x1`` ``[n, d]`` and ``x2`` ``[m, d]`` by one matrix
    multiply of their :func:`l2_factors`:

    .. math::
        d(a, b) = \\sqrt{\\max(|a|^2 + |b|^2 - 2 a \\cdot b, 0)}

    About ten times faster than ``torch.cdist``'s direct mode; the price is cancellation for nearly equal
    vectors (``d(a, a)`` is a few ``sqrt(eps) |a|`` rather than exactly ``0``).

    Args:
        x1: ``[n, d]``.
        x2: ``[m, d]``.
        out: A contiguous ``[n, m]`` tensor to write into (saves the allocation, and its page faults, of
            repeated calls).
        squared: Return ``|a|^2 + |b|^2 - 2 a.b`` as it is (squared distances, possibly slightly negative):
            the same ranking for two passes less.
    """
    _check_pair(x1, x2)
    dist = torch.mm(l2_factors(x1, query=True), l2_factors(x2, query=False).T, out=out)
    return dist if squared else l2_from_squared_(dist)


def l2_from_squared_(squared: Tensor) -> Tensor:
    """``sqrt(max(squared, 0))`` in place: Euclidean distances from the squared ones of :func:`l2_dist_mm`
    (which rounding may leave slightly negative)."""
    return squared.clamp_(min=0.0).sqrt_()


def cosine_dist_mm(x1: Tensor, x2: Tensor, out: Tensor | None = None, clamp: bool = True) -> Tensor:
    """Cosine distances ``1 - cos(a, b)``, in ``[0, 2]``, between the rows of ``x1`` ``[n, d]`` and ``x2``
    ``[m, d]``: ``[n, m]``, by one matrix multiply of their :func:`cosine_factors`.

    Args:
        x1: ``[n, d]``.
        x2: ``[m, d]``.
        out: A contiguous ``[n, m]`` tensor to write into.
        clamp: Clamp to ``[0, 2]`` (rounding may step slightly out); ``False`` keeps the ranking, one pass less.
    """
    _check_pair(x1, x2)
    dist = torch.mm(cosine_factors(x1, query=True), cosine_factors(x2, query=False).T, out=out)
    return dist.clamp_(min=0.0, max=2.0) if clamp else dist


def pairwise_dist(x1: Tensor, x2: Tensor, p: int = 2) -> Tensor:
    """All distances between the rows of ``x1`` ``[n, d]`` and ``x2`` ``[m, d]``: ``[n, m]``.

    For ``p == 2`` the matrix-multiply form :func:`l2_dist_mm` (fast; equal vectors are about ``1e-3`` rather
    than exactly ``0`` apart in float32); other ``p`` go to ``torch.cdist``.
    """
    _check_pair(x1, x2)
    if p == 2:
        return l2_dist_mm(x1, x2)
    return torch.cdist(x1, x2, p=p)


def pairwise_l2(features: Tensor) -> Tensor:
    """``D[i, j] = ||x_i - x_j||_2`` for the rows of ``features`` ``[B, d]``: a ``[B, B]`` differentiable matrix,
    exact near zero (the distances of the losses' batches).

    The rows are centred first (``x - mean(x)``, which leaves the distances unchanged), then :func:`l2_dist_mm`
    gives ``|a - b|^2 = |a|^2 + |b|^2 - 2 a.b``. That form loses precision by cancellation when ``|a - b|`` is
    small next to ``|a|`` and ``|b|``, so the close pairs (``|a - b|^2 <= CLOSE_RATIO (|a|^2 + |b|^2)``, which
    includes duplicated rows) are recomputed directly as ``torch.linalg.vector_norm(a - b)``, in chunks of
    :data:`PAIRS_CHUNK_VALUES` values; the diagonal is exactly ``0``. The gradient is the one of
    ``vector_norm``::

        dD[i, j] / dx_i = (x_i - x_j) / D[i, j]        (0 where D[i, j] == 0, as vector_norm gives)

    so that ``x.grad = rowsum(S) * x - S @ x`` with ``S = G + G^T``, ``G = grad / D``: one more matrix multiply
    for the far pairs, and the direct differences for the close ones. Finite for duplicated rows. Memory: a few
    ``[B, B]`` matrices, never a ``[B, B, d]`` tensor of differences.

    Precision: the distances are computed in float32 (float64 stays float64), outside autocast
    (:func:`~oml_core.utils.precision.full_precision`): under mixed precision the matrix multiply would give 16
    bits and the close pairs' norms 32, and 16-bit distances lose the order of close pairs. The gradient flows
    back to ``features`` in their own type.

    Args:
        features: ``[B, d]`` rows.

    Returns:
        ``[B, B]`` distances (float32, or float64 for float64 ``features``).

    Raises:
        ValueError: ``features`` is not two-dimensional.
    """
    if features.ndim != 2:
        raise ValueError(f"features must be [batch_size, dim], got the shape {tuple(features.shape)}")
    with full_precision(features.device):
        return _PairwiseL2.apply(to_full_precision(features))


def _close_pair_diffs(x: Tensor, ids_i: Tensor, ids_j: Tensor) -> Iterator[tuple[slice, Tensor]]:
    """``x[i] - x[j]`` of the pairs, in chunks of at most :data:`PAIRS_CHUNK_VALUES` values."""
    rows = max(1, PAIRS_CHUNK_VALUES // max(1, x.shape[1]))
    for chunk in iter_chunks(len(ids_i), rows):
        yield chunk, x[ids_i[chunk]] - x[ids_j[chunk]]


def _close_pairs(sq: Tensor, norms: Tensor) -> tuple[Tensor, Tensor]:
    """Unordered pairs ``i < j`` with ``sq[i, j] <= CLOSE_RATIO * (norms[i] + norms[j])`` in either order."""
    scaled = norms * CLOSE_RATIO
    close = sq <= scaled[:, None] + scaled[None, :]
    ids_i, ids_j = torch.nonzero(close, as_tuple=True)
    upper = ids_i < ids_j
    lower_only = (ids_i > ids_j) & ~close[ids_j, ids_i]
    keep = upper | lower_only
    return torch.minimum(ids_i, ids_j)[keep], torch.maximum(ids_i, ids_j)[keep]


class _BackwardCtx(Protocol):
    """What :meth:`_PairwiseL2.backward` reads from its context, torch's ``BackwardCFunction`` (whose stub
    types ``saved_tensors`` as a 1-tuple, and ``FunctionCtx`` lacks it)."""

    @property
    def saved_tensors(self) -> tuple[Tensor, ...]: ...


class _PairwiseL2(torch.autograd.Function):
    @staticmethod
    def forward(ctx: FunctionCtx, x: Tensor) -> Tensor:
        centred = x - x.mean(dim=0)
        norms = squared_norms(centred)
        sq = l2_dist_mm(centred, centred, squared=True)
        ids_i, ids_j = _close_pairs(sq, norms)
        dist = l2_from_squared_(sq).fill_diagonal_(0.0)
        close_dist = torch.cat(
            [torch.linalg.vector_norm(diff, dim=1) for _, diff in _close_pair_diffs(x, ids_i, ids_j)]
            or [x.new_zeros(0)]
        )
        dist[ids_i, ids_j] = close_dist
        dist[ids_j, ids_i] = close_dist
        ctx.save_for_backward(x, centred, dist, ids_i, ids_j, close_dist)
        return dist

    @staticmethod
    @once_differentiable
    def backward(ctx: _BackwardCtx, grad: Tensor) -> Tensor:
        x, centred, dist, ids_i, ids_j, close_dist = ctx.saved_tensors
        close_grad = grad[ids_i, ids_j] + grad[ids_j, ids_i]
        weights = (grad / dist).fill_diagonal_(0.0)  # far pairs are > 0 apart; the others are set here
        weights[ids_i, ids_j] = 0.0
        weights[ids_j, ids_i] = 0.0
        sym = weights.T.contiguous().add_(weights)  # faster than weights + weights.T
        x_grad = torch.addmm(sym.sum(dim=1, keepdim=True) * centred, sym, centred, alpha=-1.0)
        close_weights = torch.where(close_dist > 0, close_grad / close_dist, 0.0)
        for chunk, diff in _close_pair_diffs(x, ids_i, ids_j):
            contribution = close_weights[chunk, None] * diff
            x_grad.index_add_(0, ids_i[chunk], contribution)
            x_grad.index_add_(0, ids_j[chunk], -contribution)
        return x_grad


def iter_chunks(n: int, chunk_size: int) -> Iterator[slice]:
    """Slices ``[0, c), [c, 2c), ...`` covering ``range(n)``; used to keep memory bounded by a chunk."""
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    for start in range(0, n, chunk_size):
        yield slice(start, min(start + chunk_size, n))


def first_non_finite(tensors: Iterable[tuple[str, object]]) -> str | None:
    """The name of the first floating-point tensor of ``tensors`` (``(name, value)`` pairs: a module's
    ``named_parameters()``, a state dict's ``items()``) that has a NaN or infinite value, or None.

    One sum per tensor screens them (a sum of finite values is finite, unless it overflows); only a tensor whose
    sum is not finite is scanned value by value. Integer tensors (counters) and values that are not tensors (a
    module's extra state) are never at fault.
    """
    for name, tensor in tensors:
        if not isinstance(tensor, Tensor) or not (tensor.is_floating_point() or tensor.is_complex()):
            continue
        values = tensor.detach()
        if not torch.isfinite(values.sum()) and not torch.isfinite(values).all():
            return name
    return None


def normalise(x: Tensor, p: int = 2) -> Tensor:
    """The rows of ``x`` ``[n, d]`` divided by their ``p``-norms, as OML's ``normalise``: the norms are
    detached, so the gradient flows through the numerator only (``torch.nn.functional.normalize`` also
    differentiates the norm). A zero row stays zero (its norm is clamped to :data:`NORM_EPS`; OML's gives NaN).

    Raises:
        OmlValueError: ``x`` is not two-dimensional.
    """
    if x.ndim != 2:
        raise OmlValueError(f"x must be [n, d], got the shape {tuple(x.shape)}")
    norms = torch.linalg.vector_norm(x, ord=p, dim=1).detach().clamp(min=NORM_EPS)
    return x / norms[:, None]


def get_device(model: torch.nn.Module) -> str:
    """The device of the first parameter of ``model``, as a string (``"cpu"``, ``"cuda:0"``).

    Raises:
        StopIteration: ``model`` has no parameters.
    """
    return str(next(model.parameters()).device)


def is_sorted_tensor(x: Tensor) -> bool:
    """Whether the 1-D ``x`` is sorted ascending, where two neighbours closer than ``10 * eps`` of its dtype
    count as equal (so ``[0, 3e-50, 2e-50]`` in float32 is sorted: rounding cannot order them). Integer tensors
    are compared exactly.

    Raises:
        OmlValueError: ``x`` is not one-dimensional.
    """
    if x.ndim != 1:
        raise OmlValueError(f"x must be one-dimensional, got the shape {tuple(x.shape)}")
    diffs = x[1:] - x[:-1]
    if x.dtype.is_floating_point:
        diffs[diffs.abs() < 10 * torch.finfo(x.dtype).eps] = 0
    return bool((diffs >= 0).all())


def cat_two_sorted_tensors_and_keep_it_sorted(x1: Tensor, x2: Tensor, eps: float = 1e-6) -> Tensor:
    """Concatenate the row-wise sorted ``x1`` ``[N, M]`` and ``x2`` ``[N, P]`` into ``[N, M + P]`` rows that stay
    sorted: where a row's last ``x1`` value ``a`` is above its first ``x2`` value ``b``, its ``x1`` part is
    brought below ``b`` (OML's rule for re-scored distances, followed by oml's postprocessors)::

        x1 * (b / a) - eps         when b > 0 (a scale that keeps the part's order, OML's rule)
        x1 - (a - b) - eps         when b <= 0 (a shift: a scale by b / a <= 0 would reverse or flatten it)

    then clipped to ``<= b``. The inputs are not modified (OML's function scales ``x1`` in place). An empty
    input gives the other one as it is.

    Raises:
        OmlValueError: ``eps`` is negative, or the two have different numbers of rows.
    """
    if eps < 0:
        raise OmlValueError(f"eps must be >= 0, got {eps}")
    if not x1.numel():
        return x2
    if not x2.numel():
        return x1
    if x1.shape[0] != x2.shape[0]:
        raise OmlValueError(
            f"x1 and x2 must have the same number of rows, got {x1.shape[0]} and {x2.shape[0]}"
        )
    dtype = torch.promote_types(torch.promote_types(x1.dtype, x2.dtype), torch.float32)
    x1, x2 = x1.to(dtype), x2.to(dtype)
    last, first = x1[:, -1:], x2[:, :1]
    scaled = x1 * (first / last) - eps
    shifted = x1 - (last - first) - eps
    fitted = torch.minimum(torch.where(first > 0, scaled, shifted), first)
    return torch.cat([torch.where(last > first, fitted, x1), x2], dim=1)


#: The data of :func:`unique_by_ids`: a list, a tensor or an array with one record per id (OML's ``TData``).
TData = list[Any] | Tensor | np.ndarray


def unique_by_ids(ids: Sequence[int], data: TData) -> tuple[list[int], TData]:
    """The records of ``data`` without repeated ids: the ids sorted ascending, each with the record of its first
    occurrence (a list gives a list, a tensor or an array the rows of the same type).

    Args:
        ids: ``N`` integer ids.
        data: ``N`` records.

    Returns:
        ``(unique ids, their records)``.

    Raises:
        OmlValueError: ``ids`` and ``data`` differ in length.
    """
    if len(ids) != len(data):
        raise OmlValueError(f"ids and data must have the same length, got {len(ids)} and {len(data)}")
    ids_unique, first_positions = np.unique(np.asarray(ids, dtype=np.int64), return_index=True)
    if isinstance(data, (list, tuple)):
        return ids_unique.tolist(), [data[i] for i in first_positions]
    if isinstance(data, Tensor):
        return ids_unique.tolist(), data[torch.as_tensor(first_positions, device=data.device)]
    return ids_unique.tolist(), data[first_positions]


@contextmanager
def temporary_setting_model_mode(model: torch.nn.Module, set_train: bool) -> Iterator[torch.nn.Module]:
    """``model`` in train mode (``set_train=True``) or eval mode inside the ``with`` block; its previous mode
    is restored afterwards, also when the block raises."""
    was_training = model.training
    model.train(set_train)
    try:
        yield model
    finally:
        model.train(was_training)


#: A single value or a sequence of values for the online statistics (OML's names).
TSingleValues = int | float | np.floating | np.integer | Tensor
TSequenceValues = list[float] | tuple[float, ...] | np.ndarray | Tensor
TOnlineValues = TSingleValues | TSequenceValues


def _is_sequence(value: Any) -> bool:
    """Whether ``value`` holds several values (has a length): a 0-d tensor or array is a single value."""
    try:
        len(value)
    except TypeError:
        return False
    return True


class OnlineCalc(ABC):
    """A statistic of a stream of values, updated batch by batch (``result``)."""

    def __init__(self, val: TOnlineValues | None = None) -> None:
        self.result: float = 0.0
        if val is not None:
            self.update(val)

    def update(self, val: TOnlineValues) -> None:
        """Take one value or a batch of values into the statistic."""
        self.calc_with_batch(val if _is_sequence(val) else [val])  # type: ignore[arg-type,list-item]

    def calc_with_single_value(self, val: TSingleValues) -> None:
        """Take one value (OML's name of ``update`` with a single value)."""
        self.calc_with_batch([val])  # type: ignore[list-item]

    @abstractmethod
    def calc_with_batch(self, val: TSequenceValues) -> None:
        """Take a batch of values into ``result``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__})"


class AvgOnline(OnlineCalc):
    """The running mean of every value seen: after ``n`` values and a batch of ``m`` more,
    ``result = (n * result + sum(batch)) / (n + m)``."""

    def __init__(self, val: TOnlineValues | None = None) -> None:
        self.n = 0
        super().__init__(val)

    def calc_with_batch(self, val: TSequenceValues) -> None:
        n_new = len(val)
        if n_new == 0:
            return
        self.n += n_new
        self.result = float(sum(val)) / self.n + (self.n - n_new) / self.n * self.result


class SumOnline(OnlineCalc):
    """The running sum of every value seen."""

    def calc_with_batch(self, val: TSequenceValues) -> None:
        self.result += float(sum(val))


class OnlineDict(MutableMapping[Hashable, float]):
    """A dict of online statistics, one per key, of the type :attr:`online_calculator`: reading a key gives
    its ``result``; :meth:`update` feeds each key's statistic (a new key starts one); setting a key starts it
    anew with the value."""

    online_calculator: type[OnlineCalc]

    def __init__(self, input_dict: Mapping[Hashable, TOnlineValues] | None = None) -> None:
        self.dict: dict[Hashable, OnlineCalc] = {}
        if input_dict:
            self.update(input_dict)

    def __setitem__(self, key: Hashable, value: TOnlineValues) -> None:
        self.dict[key] = self.online_calculator(value)

    def __getitem__(self, key: Hashable) -> float:
        return self.dict[key].result

    def __delitem__(self, key: Hashable) -> None:
        del self.dict[key]

    def __len__(self) -> int:
        return len(self.dict)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.dict)

    def update(self, input_dict: Mapping[Hashable, TOnlineValues]) -> None:  # type: ignore[override]
        """Feed the values of ``input_dict`` to the statistics of their keys."""
        for key, value in input_dict.items():
            if key in self.dict:
                self.dict[key].update(value)
            else:
                self[key] = value

    def get_dict_with_results(self) -> dict[Hashable, float]:
        """The results as a plain dict."""
        return dict(self.items())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_dict_with_results()})"


class OnlineAvgDict(OnlineDict):
    """An :class:`OnlineDict` of running means."""

    online_calculator = AvgOnline


class OnlineSumDict(OnlineDict):
    """An :class:`OnlineDict` of running sums."""

    online_calculator = SumOnline
