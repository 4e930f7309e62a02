"""Validation of the samplers' scalar arguments, with errors that name the argument at fault: an
:class:`~oml_core.utils.errors.OmlValueError`, which is also the ``AssertionError`` of OML's ``assert``."""

from __future__ import annotations

import math
from typing import Any

from oml_core.config.bounds import MAX_BATCH_SIZE
from oml_core.utils.errors import OmlValueError


def check_int(value: Any, name: str, meaning: str, minimum: int) -> int:
    """Return ``value`` if it is an int (bools refused) of at least ``minimum``.

    Raises:
        OmlValueError: ``value`` is not an int, or is below ``minimum``; the message names ``name`` and says
            what it means.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise OmlValueError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        relation = f"> {minimum - 1}" if minimum > 1 else f">= {minimum}"
        raise OmlValueError(f"{name} ({meaning}) should be {relation}, got {value}")
    return value


def check_batch_size(**counts: int) -> None:
    """Refuse a batch of more than :data:`~oml_core.config.bounds.MAX_BATCH_SIZE` items: the product of ``counts``
    (checked ints, e.g. ``n_labels=8, n_instances=4``), a plausibility bound (``n_instances=10**9`` would draw
    batches that no memory holds).

    Raises:
        OmlValueError: ``n_labels x n_instances = 8 x 1000000000 = 8,000,000,000 items per batch, past the limit
            of 65,536``.
    """
    size = math.prod(counts.values())
    if size > MAX_BATCH_SIZE:
        names = " x ".join(counts)
        values = " x ".join(str(value) for value in counts.values())
        raise OmlValueError(
            f"{names} = {values} = {size:,} items per batch, past the limit of {MAX_BATCH_SIZE:,}"
        )


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` if it is a bool.

    Raises:
        OmlValueError: ``value`` is not a bool (``0``, ``1`` or ``"false"`` are refused, not guessed).
    """
    if not isinstance(value, bool):
        raise OmlValueError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return value
