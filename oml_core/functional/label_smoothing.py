"""Label smoothing of one-hot targets, globally or inside the category of the true label."""

from __future__ import annotations

import torch
from torch import Tensor

from oml_core.utils.checks import check_int


def label_smoothing(
    y: Tensor, num_classes: int, epsilon: float = 0.2, categories: Tensor | None = None
) -> Tensor:
    """This function is doing label smoothing.

    Without ``categories`` the one-hot vector of every label ``y_i`` becomes::

        target[i, c] = (1 - epsilon) * 1[c == y_i] + epsilon / num_classes

    so that its biggest value is ``1 - epsilon + epsilon / num_classes``. With ``categories`` (``categories[c]``
    is the category of the label ``c``) the ``epsilon`` is spread only over the labels of the true label's
    category, and the labels outside of it stay ``0``::

        target[i, c] = (1 - epsilon) * 1[c == y_i] + epsilon * 1[cat(c) == cat(y_i)] / #{c': cat(c') == cat(y_i)}

    Every row sums to ``1``.

    Args:
        y: Ground truth labels with the size of batch_size where each element is from 0 (inclusive) to
            num_classes (exclusive).
        num_classes: Number of classes in total.
        epsilon: Power of smoothing, ``0 <= epsilon < 1``.
        categories: Vector for which i-th entry is a corresponding category for label ``i``. Optional, used for
            category-based label smoothing.

    Returns:
        ``[batch_size, num_classes]`` float targets (no gradient).

    Raises:
        ValueError: ``epsilon`` is out of ``[0, 1)``, ``num_classes`` is not a positive int, ``y`` is not a 1-D
            integer tensor of labels in ``[0, num_classes)``, or ``categories`` is not ``[num_classes]``.
    """
    check_int(num_classes, "num_classes", expected="a positive int")
    if not 0 <= epsilon < 1:
        raise ValueError(f"epsilon must be in [0, 1), got {epsilon!r}")
    if y.ndim != 1 or y.dtype.is_floating_point or y.dtype == torch.bool:
        raise ValueError(
            f"y must be a 1-D tensor of integer labels, got {y.dtype} of the shape {tuple(y.shape)}"
        )
    if len(y) and not (0 <= int(y.min()) and int(y.max()) < num_classes):
        raise ValueError(
            f"y must hold labels in [0, {num_classes}), got the range [{int(y.min())}, {int(y.max())}]"
        )
    with torch.no_grad():
        target = torch.nn.functional.one_hot(y.long(), num_classes).float().mul_(1 - epsilon)
        if categories is None:
            return target.add_(epsilon / num_classes)
        if categories.shape != (num_classes,):
            raise ValueError(
                f"categories must be a [num_classes] = [{num_classes}] tensor, got the shape {tuple(categories.shape)}"
            )
        categories = categories.to(y.device)
        same_category = categories[y][:, None] == categories[None, :]
        return target.add_(same_category * (epsilon / same_category.sum(dim=1, keepdim=True)))


__all__ = ["label_smoothing"]
