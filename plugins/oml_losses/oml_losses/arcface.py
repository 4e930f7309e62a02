"""ArcFace (additive angular margin) losses: :class:`ArcFaceLoss` and :class:`ArcFaceLossWithMLP`."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from oml_core.functional.label_smoothing import label_smoothing
from oml_core.utils.errors import OmlValueError
from oml_losses.reduction import check_reduction

#: Floor of ``1 - cos^2`` under the square root: keeps the gradient finite where ``cos = +-1``.
SIN_SQ_EPS = 1e-12


def _check_positive_int(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def label2category_tensor(label2category: Mapping[Any, Hashable], num_classes: int) -> Tensor:
    """``categories[label]``: the category of each label ``0 .. num_classes - 1`` as an integer id.

    The categories may be any hashable values (strings, ints); they are numbered in the order of their
    first appearance among the labels ``0, 1, ..``.

    Raises:
        ValueError: a label of ``0 .. num_classes - 1`` has no category.
    """
    missing = [label for label in range(num_classes) if label not in label2category]
    if missing:
        raise ValueError(
            f"label2category must give a category to every label 0..{num_classes - 1}; missing: {missing[:10]}"
        )
    ids: dict[Hashable, int] = {}
    return torch.tensor([ids.setdefault(label2category[label], len(ids)) for label in range(num_classes)])


class ArcFaceLoss(nn.Module):
    """ArcFace loss from `the paper <https://arxiv.org/abs/1801.07698>`_ with possibility to use label smoothing.

    It contains the projection of size ``in_features x num_classes`` (one unit-normalised weight vector per
    class) inside itself. Please make sure that class labels start with 0 and end with ``num_classes - 1``.
    For features ``x`` and labels ``y``, with ``cos[i, c] = <x_i / |x_i|, W_c / |W_c|> = cos(theta[i, c])``::

        logits[i, c] = s * cos(theta[i, c] + m)       if c == y_i and theta[i, c] + m <= pi
        logits[i, c] = s * (cos[i, c] - m sin(m))     if c == y_i and theta[i, c] + m > pi  (cos < -cos(m))
        logits[i, c] = s * cos[i, c]                  otherwise
        loss = CrossEntropy(logits, targets, reduction)

    with ``cos(theta + m) = cos(theta) cos(m) - sin(theta) sin(m)``. The targets are the labels, or, when
    ``smoothing_epsilon > 0``, their smoothed one-hot vectors (:func:`~oml_core.functional.label_smoothing.
    label_smoothing`), smoothed inside each label's category when ``label2category`` is given.
    ``last_logs["accuracy"]`` is the share of the batch whose nearest class (largest ``cos``) is its label.

    Args:
        in_features: Input feature size.
        num_classes: Number of classes in train set.
        m: Margin parameter for ArcFace loss. Usually you should use 0.3-0.5 values for it.
        s: Scaling parameter for ArcFace loss. Usually you should use 30-64 values for it.
        smoothing_epsilon: Label smoothing effect strength, ``0 <= smoothing_epsilon < 1`` (``None``: none, as
            ``0``).
        label2category: Optional, mapping from label to its category. If provided, label smoothing will
            redistribute ``smoothing_epsilon`` only inside the category corresponding to the sample's ground
            truth label.
        reduction: CrossEntropyLoss reduction: ``mean``, ``sum`` or ``none``.
        generator: Random generator of the weights' (Xavier uniform) initialisation; the global one if
            ``None``, as for any ``nn.Module``.

    Raises:
        ValueError: a size is not a positive int, ``m`` is out of ``[0, pi)``, ``s`` is not positive,
            ``smoothing_epsilon`` is out of ``[0, 1)`` (an ``OmlValueError``: also an ``AssertionError``, as
            OML's), a label lacks a category, or ``reduction`` is unknown.
    """

    criterion_name = "arcface"

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        m: float = 0.5,
        s: float = 64,
        smoothing_epsilon: float | None = 0,
        label2category: Mapping[Any, Hashable] | None = None,
        reduction: str = "mean",
        *,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.in_features = _check_positive_int(in_features, "in_features")
        self.num_classes = _check_positive_int(num_classes, "num_classes")
        if not 0 <= m < math.pi:
            raise ValueError(f"m must be in [0, pi), got {m!r}")
        if not s > 0:
            raise ValueError(f"s must be positive, got {s!r}")
        smoothing_epsilon = 0 if smoothing_epsilon is None else smoothing_epsilon  # OML's "no smoothing"
        if not 0 <= smoothing_epsilon < 1:
            raise OmlValueError(f"smoothing_epsilon must be in [0, 1), got {smoothing_epsilon!r}")
        self.m, self.s, self.smoothing_epsilon = m, s, smoothing_epsilon
        self.reduction = check_reduction(reduction)
        #: OML's attribute: the cross-entropy of the margin logits and the (smoothed) targets.
        self.criterion = nn.CrossEntropyLoss(reduction=self.reduction)
        categories = None if label2category is None else label2category_tensor(label2category, num_classes)
        self.register_buffer("label2category", categories, persistent=False)
        self.weight = nn.Parameter(torch.empty(num_classes, in_features))
        nn.init.xavier_uniform_(self.weight, generator=generator)
        self.last_logs: dict[str, float] = {}

    def fc(self, x: Tensor) -> Tensor:
        """``cos[i, c]``: cosine similarities ``[batch_size, num_classes]`` of ``x`` and the class weights."""
        return F.linear(F.normalize(x, p=2, dim=1), F.normalize(self.weight, p=2, dim=1))

    def logits(self, x: Tensor, y: Tensor) -> Tensor:
        """The margin-adjusted, scaled logits ``[batch_size, num_classes]`` (see the class docs)."""
        cos = self.fc(x)
        with torch.no_grad():
            self.last_logs["accuracy"] = float((cos.argmax(dim=1) == y).float().mean())
        cos_y = cos.gather(1, y[:, None])
        sin_y = (1 - cos_y * cos_y).clamp(min=SIN_SQ_EPS).sqrt()
        cos_y_margin = torch.where(
            cos_y > -math.cos(self.m),  # theta + m <= pi
            cos_y * math.cos(self.m) - sin_y * math.sin(self.m),
            cos_y - math.sin(self.m) * self.m,
        )
        return cos.scatter(1, y[:, None], cos_y_margin) * self.s

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        """Return the loss.

        Args:
            x: Features ``[batch_size, in_features]``.
            y: Labels ``[batch_size]`` in ``[0, num_classes)``.

        Returns:
            Loss value: a scalar for ``mean``/``sum``, ``[batch_size]`` for ``none``.

        Raises:
            ValueError: ``x`` is not ``[batch_size, in_features]``, or ``y`` is not ``[batch_size]`` integer
                labels in ``[0, num_classes)``.
        """
        y = torch.as_tensor(y, device=x.device)
        if x.ndim != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"x must be [batch_size, {self.in_features}], got the shape {tuple(x.shape)}")
        if y.shape != (len(x),) or y.dtype.is_floating_point or y.dtype == torch.bool:
            raise ValueError(
                f"y must be [batch_size] = [{len(x)}] integer labels, got {y.dtype} {tuple(y.shape)}"
            )
        if len(y) and not (0 <= int(y.min()) and int(y.max()) < self.num_classes):
            raise OmlValueError(
                f"y must hold labels in [0, {self.num_classes}), got the range [{int(y.min())}, {int(y.max())}]"
            )
        y = y.long()
        logits = self.logits(x, y)
        if self.smoothing_epsilon:
            return self.criterion(
                logits, label_smoothing(y, self.num_classes, self.smoothing_epsilon, self.label2category)
            )
        return self.criterion(logits, y)


def _mlp(in_features: int, mlp_features: Sequence[int], generator: torch.Generator | None) -> nn.Sequential:
    """``Linear, ReLU, .., Linear``: a ReLU between the layers, none after the last one (as torchvision's MLP)."""
    sizes = [in_features, *mlp_features]
    layers: list[nn.Module] = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        linear = nn.Linear(fan_in, fan_out)
        if generator is not None:  # nn.Linear's own initialisation, drawn from ``generator``
            nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5), generator=generator)
            nn.init.uniform_(linear.bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), generator=generator)
        layers += [linear, nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class ArcFaceLossWithMLP(nn.Module):
    """Almost the same as :class:`ArcFaceLoss`, but also has MLP projector before the loss.

    ``loss(x, y) = ArcFaceLoss(mlp(x), y)`` with ``mlp = Linear(in_features, mlp_features[0]), ReLU, ...,
    Linear(mlp_features[-2], mlp_features[-1])``. You may want to use it to boost the expressive power of
    ArcFace loss during the training (for example, in a multi-head setup it may be a good idea to have
    task-specific projectors in each of the losses). Note, the criterion does not exist during the
    validation time. Thus, if you want to keep your MLP layers, you should create them as a part of the
    model you train.

    Args:
        in_features: Input feature size.
        num_classes: Number of classes in train set.
        mlp_features: Layers sizes for MLP before ArcFace.
        m: Margin parameter for ArcFace loss. Usually you should use 0.3-0.5 values for it.
        s: Scaling parameter for ArcFace loss. Usually you should use 30-64 values for it.
        smoothing_epsilon: Label smoothing effect strength.
        label2category: Optional, mapping from label to its category. If provided, label smoothing will
            redistribute ``smoothing_epsilon`` only inside the category corresponding to the sample's ground
            truth label.
        reduction: CrossEntropyLoss reduction.
        generator: Random generator of the initialisation of the MLP and of the ArcFace weights.

    Raises:
        ValueError: ``mlp_features`` is empty or holds a size that is not a positive int, or any argument
            :class:`ArcFaceLoss` rejects.
    """

    criterion_name = "arcface"

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        mlp_features: Sequence[int],
        m: float = 0.5,
        s: float = 64,
        smoothing_epsilon: float | None = 0,
        label2category: Mapping[Any, Hashable] | None = None,
        reduction: str = "mean",
        *,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if (
            isinstance(mlp_features, str | bytes)
            or not isinstance(mlp_features, Sequence)
            or not mlp_features
        ):
            raise ValueError(f"mlp_features must be a non-empty list of layer sizes, got {mlp_features!r}")
        for size in mlp_features:
            _check_positive_int(size, "every size of mlp_features")
        self.in_features = _check_positive_int(in_features, "in_features")
        self.mlp = _mlp(self.in_features, list(mlp_features), generator)
        self.arcface = ArcFaceLoss(
            mlp_features[-1],
            num_classes=num_classes,
            m=m,
            s=s,
            smoothing_epsilon=smoothing_epsilon,
            label2category=label2category,
            reduction=reduction,
            generator=generator,
        )

    @property
    def num_classes(self) -> int:
        """The number of classes of the inner :class:`ArcFaceLoss`."""
        return self.arcface.num_classes

    @property
    def last_logs(self) -> dict[str, float]:
        """The logs of the inner :class:`ArcFaceLoss` (``accuracy``)."""
        return self.arcface.last_logs

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        """Return ``ArcFaceLoss(mlp(x), y)``; ``x`` is ``[batch_size, in_features]``."""
        if x.ndim != 2 or x.shape[1] != self.mlp[0].in_features:
            raise ValueError(
                f"x must be [batch_size, {self.mlp[0].in_features}], got the shape {tuple(x.shape)}"
            )
        return self.arcface(self.mlp(x), y)


__all__ = ["ArcFaceLoss", "ArcFaceLossWithMLP", "label2category_tensor"]
