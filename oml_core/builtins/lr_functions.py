"""The core's learning-rate functions (kind ``lr_function``): factors ``f(epoch)`` of the ``lambda`` scheduler.

Each factory takes its arguments and returns ``f(epoch) -> factor``; ``LambdaLR`` sets the learning rate of step
``epoch`` to the optimizer's initial learning rate times ``f(epoch)``. ``epoch`` counts the scheduler's steps
(epochs with ``scheduler_interval: epoch``, optimizer steps with ``step``), from 0. In a config::

    scheduling:
      scheduler: {name: lambda, args: {lr_lambda: {name: cosine, args: {total_epochs: 20, warmup_epochs: 2}}}}
      scheduler_interval: epoch

- ``constant``: ``f(e) = 1``.
- ``linear_warmup``: ``f(e) = s + (1 - s) * e / w`` for ``e < w``, then 1 (``s = start_factor``, ``w =
  warmup_epochs``).
- ``cosine``: the warm-up above for ``e < w``, then ``f(e) = m + (1 - m) * (1 + cos(pi * t)) / 2`` with ``t =
  min(1, (e - w) / (T - w))`` (``m = min_factor``, ``T = total_epochs``): 1 at ``e = w``, ``m`` from ``e = T`` on.
- ``step``: ``f(e) = gamma ** (e // step_size)``.

Every function is pure (the factor depends on ``epoch`` only), so a resumed run goes on as the uninterrupted
one. A bad argument raises a ``ValueError`` naming it when the factory is called (before training).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

from oml_core.utils.checks import check_int

#: The type of what every factory here returns: the factor of the learning rate at an epoch.
LrFunction = Callable[[int], float]


def constant() -> LrFunction:
    """``f(epoch) = 1``: the learning rate stays the optimizer's."""

    def factor(epoch: int) -> float:
        return 1.0

    return factor


def linear_warmup(warmup_epochs: int = 5, start_factor: float = 0.1) -> LrFunction:
    """A linear warm-up: ``f(e) = start_factor + (1 - start_factor) * e / warmup_epochs`` for ``e <
    warmup_epochs``, then 1 (``warmup_epochs = 0``: 1 throughout).

    Example: ``linear_warmup(4, 0.2)`` gives ``0.2, 0.4, 0.6, 0.8, 1, 1, ...`` at ``e = 0, 1, 2, ...``.

    Raises:
        ValueError: ``warmup_epochs`` is not an integer >= 0, or ``start_factor`` is not a number in [0, 1].
    """
    warmup = _warmup(warmup_epochs, start_factor)

    def factor(epoch: int) -> float:
        return warmup(epoch) if epoch < warmup_epochs else 1.0

    return factor


def cosine(
    total_epochs: int = 100, min_factor: float = 0.0, warmup_epochs: int = 0, start_factor: float = 0.1
) -> LrFunction:
    """Cosine decay from 1 to ``min_factor`` over ``total_epochs``, after an optional linear warm-up.

    ``f(e)`` is ``linear_warmup(warmup_epochs, start_factor)(e)`` for ``e < warmup_epochs``, then
    ``min_factor + (1 - min_factor) * (1 + cos(pi * t)) / 2`` with ``t = min(1, (e - warmup_epochs) /
    (total_epochs - warmup_epochs))``: 1 at ``e = warmup_epochs``, ``min_factor`` at ``e >= total_epochs``.

    Example: ``cosine(4)`` gives ``1, 0.8536, 0.5, 0.1464, 0, 0, ...`` at ``e = 0, 1, 2, ...``.

    Raises:
        ValueError: ``total_epochs`` is not an integer > ``warmup_epochs``, ``warmup_epochs`` not an integer >= 0,
            or ``min_factor`` or ``start_factor`` not a number in [0, 1].
    """
    warmup = _warmup(warmup_epochs, start_factor)
    check_int(total_epochs, "total_epochs", least=warmup_epochs + 1)
    _check_fraction(min_factor, "min_factor")
    decay_epochs = total_epochs - warmup_epochs

    def factor(epoch: int) -> float:
        if epoch < warmup_epochs:
            return warmup(epoch)
        progress = min(1.0, (epoch - warmup_epochs) / decay_epochs)
        return min_factor + (1.0 - min_factor) * (1.0 + math.cos(math.pi * progress)) / 2.0

    return factor


def step(step_size: int = 10, gamma: float = 0.1) -> LrFunction:
    """Step decay: ``f(e) = gamma ** (e // step_size)`` (the factor times ``gamma`` every ``step_size`` epochs).

    Example: ``step(2, 0.5)`` gives ``1, 1, 0.5, 0.5, 0.25, ...`` at ``e = 0, 1, 2, ...``.

    Raises:
        ValueError: ``step_size`` is not a positive integer, or ``gamma`` not a number > 0.
    """
    check_int(step_size, "step_size")
    if not _is_real(gamma) or not gamma > 0:
        raise ValueError(f"gamma must be a number > 0, got {gamma!r}")

    def factor(epoch: int) -> float:
        return float(gamma ** (epoch // step_size))

    return factor


def _warmup(warmup_epochs: int, start_factor: float) -> LrFunction:
    """``f(e) = start_factor + (1 - start_factor) * e / warmup_epochs``, the factor during a linear warm-up (for
    ``e < warmup_epochs``), its arguments checked."""
    check_int(warmup_epochs, "warmup_epochs", least=0)
    _check_fraction(start_factor, "start_factor")

    def factor(epoch: int) -> float:
        return start_factor + (1.0 - start_factor) * epoch / warmup_epochs

    return factor


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _check_fraction(value: object, name: str) -> None:
    """Raise ``ValueError("<name> must be a number in [0, 1], got <value>")`` unless ``0 <= value <= 1``."""
    if not _is_real(value) or not 0 <= value <= 1:  # type: ignore[operator]  # a real number here
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")


__all__ = ["LrFunction", "constant", "cosine", "linear_warmup", "step"]
