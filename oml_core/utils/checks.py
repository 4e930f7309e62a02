"""Input checks shared by the core: one function per concept, each raising a ``ValueError`` that names the argument.

A ``bool`` is never a valid count, ``k``, index, integer code or fraction here: ``True`` is an ``int`` to Python
(and ``torch.tensor([True])`` converts to ``1``), but ``top_k=True`` or ``labels=tensor([True, False])`` is a
mistake, so every check refuses it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor


def is_int(value: Any) -> bool:
    """Whether ``value`` is a Python or numpy integer and not a ``bool`` (``True``, ``np.bool_``)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(
    value: Any, name: str, least: int | None = 1, *, allow_none: bool = False, expected: str | None = None
) -> Any:
    """``value`` as an ``int`` when it is an integer (not a ``bool``) ``>= least``, or ``None`` when allowed.

    Args:
        value: What was given.
        name: The argument's name, for the message.
        least: The smallest valid value (``None``: no bound).
        allow_none: Whether ``None`` is valid (returned as it is).
        expected: The message's description of a valid value, where a test pins older wording; by default
            ``"a positive integer"`` (``least == 1``), ``"an integer >= <least>"`` or ``"an integer"``, followed
            by ``" or None"`` when ``allow_none``.

    Raises:
        ValueError: ``"<name> must be <expected>, got <value!r>"``.
    """
    if value is None and allow_none:
        return None
    if not is_int(value) or (least is not None and value < least):
        if expected is None:
            expected = "an integer" if least is None else f"an integer >= {least}"
            expected = "a positive integer" if least == 1 else expected
            expected += " or None" if allow_none else ""
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return int(value)


def check_top_k(top_k: Sequence[int], name: str = "top_k") -> tuple[int, ...]:
    """``top_k`` as a tuple of ints, when it is a non-empty sequence of positive integers (no ``bool``).

    Raises:
        ValueError: ``"<name> must be a non-empty sequence of positive integers, got <top_k!r>"``.
    """
    try:
        values = tuple(top_k)
    except TypeError:
        values = ()
    if not values or not all(is_int(k) and k > 0 for k in values):
        raise ValueError(f"{name} must be a non-empty sequence of positive integers, got {top_k!r}")
    return tuple(int(k) for k in values)


def check_in_range(values: Sequence[float], name: str, low: float = 0, high: float = 1) -> tuple[float, ...]:
    """``values`` as a tuple (the numbers as given), when it is a non-empty sequence of real numbers ``x`` (not
    ``bool``) with ``low <= x <= high`` (the fractions ``fmr_vals`` and ``pcf_variance``: ``[0, 1]``).

    Raises:
        ValueError: ``"<name> is expected to be non-empty, got ()"``, or ``"<name> is expected to contain
            numbers in range [<low>, <high>], got <values>"``, or ``"<name> is expected to be a sequence of
            numbers in range [<low>, <high>], got <values!r>"`` for something that is not a sequence.
    """
    try:
        items = tuple(values)
    except TypeError:
        raise ValueError(
            f"{name} is expected to be a sequence of numbers in range [{low}, {high}], got {values!r}"
        ) from None
    if not items:
        raise ValueError(f"{name} is expected to be non-empty, got {items}")
    real = (int, float, np.integer, np.floating)
    if not all(
        isinstance(x, real) and not isinstance(x, (bool, np.bool_)) and low <= x <= high for x in items
    ):
        raise ValueError(f"{name} is expected to contain numbers in range [{low}, {high}], got {items}")
    return items


def as_int_tensor(
    values: Sequence[int] | Tensor | np.ndarray,
    name: str,
    *,
    n: int | None = None,
    per: str = "item",
    expected: str = "hold integers",
    flatten: bool = False,
    device: torch.device | str | None = None,
) -> Tensor:
    """``values`` as a 1-D LongTensor (on ``device``, the CPU by default) when they are integers (no ``bool``).

    Args:
        values: A tensor, an array or a sequence.
        name: The argument's name, for the messages.
        n: The number of entries required (one per ``per``), when given.
        per: What there is one entry per, for the message (``"item"``, ``"embedding"``, ``"query"``).
        expected: What the values must do, for the message (``"hold integers"``, ``"hold integer codes"``).
        flatten: Flatten ``values`` of any shape; otherwise they must be 1-D.
        device: Where the result goes.

    Raises:
        ValueError: ``"<name> must be 1-D, got shape <shape>"``; ``"<name> must have one entry per <per> (<n>),
            got <len>"``; ``"<name> must <expected>, got <dtype>"`` (floats, complex numbers, bools).
    """
    t = values.detach() if isinstance(values, Tensor) else torch.as_tensor(np.asarray(values))
    t = t.reshape(-1) if flatten else t
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
    if n is not None and len(t) != n:
        raise ValueError(f"{name} must have one entry per {per} ({n}), got {len(t)}")
    if t.numel() and (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool):
        raise ValueError(f"{name} must {expected}, got {t.dtype}")
    return t.to(device or "cpu").long()


def check_indices(
    values: Sequence[int] | Tensor | np.ndarray,
    name: str,
    n_items: int,
    *,
    expected: str = "hold integers",
    device: torch.device | str | None = None,
) -> Tensor:
    """:func:`as_int_tensor` (flattened) of dataset indices, each within ``[0, n_items - 1]``.

    Raises:
        ValueError: see :func:`as_int_tensor`; ``"<name> must be dataset indices within [0, <n_items - 1>]"``.
    """
    ids = as_int_tensor(values, name, expected=expected, flatten=True, device=device)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n_items):
        raise ValueError(f"{name} must be dataset indices within [0, {n_items - 1}]")
    return ids


def check_n_gallery(n_gallery: int | Sequence[int] | Tensor, n_queries: int) -> Tensor:
    """``n_gallery`` (the number of gallery items each query could retrieve) as a ``[n_queries]`` LongTensor on
    the CPU: an integer (not a ``bool``) is broadcast to every query.

    Raises:
        ValueError: a sequence of another length than ``n_queries``, a non-integer or a negative value.
    """
    if is_int(n_gallery):
        values = torch.full((n_queries,), int(n_gallery), dtype=torch.long)  # type: ignore[arg-type]
    else:
        values = as_int_tensor(n_gallery, "n_gallery")  # type: ignore[arg-type]
        if len(values) != n_queries:
            raise ValueError(
                f"n_gallery must be an int or have one entry per query ({n_queries}), got {len(values)} entries"
            )
    if (values < 0).any():
        raise ValueError(f"n_gallery must be non-negative, got {int(values.min())} for a query")
    return values


def check_threshold(value: Any, name: str) -> float:
    """``value`` as a ``float`` when it is a usable distance threshold: a real number or ``+inf``. NaN and
    ``-inf`` are refused: no distance is below them, so every item would be cut without a word.

    Raises:
        TypeError: not a real number (a ``bool`` or a string is not one).
        ValueError: NaN or ``-inf``; the message names ``name``.
    """
    not_a_number = f"{name} must be a number (a distance threshold), got {type(value).__name__} {value!r}"
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(not_a_number)
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise TypeError(not_a_number) from None
    if math.isnan(threshold) or threshold == -math.inf:
        raise ValueError(
            f"{name} must be a number or +inf (a distance threshold), got {threshold}: it would cut every item"
        )
    return threshold


__all__ = [
    "as_int_tensor",
    "check_in_range",
    "check_indices",
    "check_int",
    "check_threshold",
    "check_top_k",
    "is_int",
]
