"""The built-in ``lambda`` and ``multiplicative`` schedulers: ``LambdaLR`` and ``MultiplicativeLR`` with a
registered learning-rate function.

In a config ``lr_lambda`` names a registered ``lr_function`` (``cosine``) or gives its spec (``{name:
linear_warmup, args: {warmup_epochs: 3}}``); the registry builds it (see
:class:`~oml_core.registry.kinds.ComponentOf`) and nothing a config holds is ever imported. In Python,
``lambda_lr`` takes any callable ``f(epoch) -> factor`` as well: code of one's own, not a config's.
"""

from __future__ import annotations

from typing import Annotated

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR, MultiplicativeLR

from oml_core.builtins.lr_functions import LrFunction
from oml_core.registry.kinds import ComponentOf


def lambda_lr(
    optimizer: Optimizer,
    lr_lambda: Annotated[LrFunction, ComponentOf("lr_function")],
    last_epoch: int = -1,
) -> LambdaLR:
    """``torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda, last_epoch)``: the learning rate of step ``e``
    is the optimizer's initial learning rate times ``lr_lambda(e)``.

    Args:
        optimizer: The optimizer whose learning rate is scheduled.
        lr_lambda: ``f(epoch) -> factor``. From a config: a registered ``lr_function`` name or ``{name, args}``
            spec, built by the registry (``oml registry lr_function`` lists them). In Python: any callable.
        last_epoch: The index of the last epoch (``-1``: start afresh).

    Raises:
        TypeError: ``lr_lambda`` is not callable (a name given in Python: build it with
            ``registry.build("lr_function", name)``; the registry does that for a config).
    """
    _check_lr_lambda(lr_lambda)
    return LambdaLR(optimizer, lr_lambda, last_epoch=last_epoch)


def multiplicative_lr(
    optimizer: Optimizer,
    lr_lambda: Annotated[LrFunction, ComponentOf("lr_function")],
    last_epoch: int = -1,
) -> MultiplicativeLR:
    """``torch.optim.lr_scheduler.MultiplicativeLR(optimizer, lr_lambda, last_epoch)``: the learning rate of step
    ``e > 0`` is the one of step ``e - 1`` times ``lr_lambda(e)`` (so ``lr_e = lr_0 * prod_{i=1..e} f(i)``; OML's
    ``multiplicative``).

    Args:
        optimizer: The optimizer whose learning rate is scheduled.
        lr_lambda: ``f(epoch) -> factor``, as for :func:`lambda_lr`.
        last_epoch: The index of the last epoch (``-1``: start afresh).

    Raises:
        TypeError: ``lr_lambda`` is not callable.
    """
    _check_lr_lambda(lr_lambda)
    return MultiplicativeLR(optimizer, lr_lambda, last_epoch=last_epoch)


def _check_lr_lambda(lr_lambda: object) -> None:
    if not callable(lr_lambda):
        raise TypeError(
            f"lr_lambda must be a callable f(epoch) -> factor, got {lr_lambda!r}; a registered lr_function is "
            f"built by the registry from a config's name or spec (registry.build('lr_function', name) in Python)"
        )


__all__ = ["lambda_lr", "multiplicative_lr"]
