"""The built-in ``lambda`` scheduler, configurable from yaml: its ``lr_lambda`` may be a ``"module:function"``
path, and :func:`constant` is a function for it."""

from __future__ import annotations

from collections.abc import Callable

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from oml_core.utils.imports import resolve


def constant(epoch: int) -> float:
    """The factor 1 at every epoch: the learning rate stays as the optimizer's (``lr_lambda`` of the default
    config of ``lambda``; write your own ``f(epoch) -> factor`` and name it ``"my_module:f"``)."""
    return 1.0


def lambda_lr(
    optimizer: Optimizer, lr_lambda: str | Callable[[int], float], last_epoch: int = -1
) -> LambdaLR:
    """``torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda, last_epoch)``: the learning rate of epoch ``e``
    is ``initial lr * lr_lambda(e)``; ``lr_lambda`` is a callable or a ``"module:function"`` path to one (a
    config cannot hold a Python lambda).

    Raises:
        ValueError: ``lr_lambda`` is a path that does not resolve, or names something that is not callable.
    """
    if isinstance(lr_lambda, str):
        try:
            function = resolve(lr_lambda)
        except (ImportError, ValueError) as e:
            raise ValueError(f"lr_lambda {lr_lambda!r}: {e}") from e
    else:
        function = lr_lambda
    if not callable(function):
        raise ValueError(f"lr_lambda {lr_lambda!r} is not callable")
    return LambdaLR(optimizer, function, last_epoch=last_epoch)


__all__ = ["constant", "lambda_lr"]
