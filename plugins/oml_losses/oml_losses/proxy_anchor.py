"""The Proxy Anchor loss of Kim et al.: :class:`ProxyAnchorLoss`."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from oml_losses.batch_pairs import (
    check_non_negative,
    check_positive,
    check_size,
    cosine_similarities,
    log1p_sum_exp,
)
from oml_losses.miners.checks import check_batch
from oml_losses.reduction import check_reduction


class ProxyAnchorLoss(nn.Module):
    """Proxy Anchor loss from `Proxy Anchor Loss for Deep Metric Learning <https://arxiv.org/abs/2003.13911>`_
    (Kim et al., CVPR 2020), as in `the authors' code <https://github.com/tjddus9597/Proxy-Anchor-CVPR2020>`_
    and pytorch-metric-learning's ``ProxyAnchorLoss``.

    It holds one learnable proxy per class, ``proxies`` ``[num_classes, in_features]`` (Kaiming-normal,
    ``mode="fan_out"``, as the authors' code). Please make sure that class labels start with 0 and end with
    ``num_classes - 1``. With ``s(x, p)`` the cosine similarity of a sample and a proxy, ``P`` all the proxies,
    ``P+`` the proxies of the labels present in the batch, ``X_p+`` the samples of ``p``'s label and ``X_p-``
    the other samples::

        pos[p] = log(1 + sum_{x in X_p+} exp(-alpha * (s(x, p) - margin)))     (0 for p not in P+)
        neg[p] = log(1 + sum_{x in X_p-} exp( alpha * (s(x, p) + margin)))
        loss = 1 / |P+| * sum_{p in P+} pos[p] + 1 / |P| * sum_{p in P} neg[p]

    computed as ``logsumexp`` (no overflow for large ``alpha``). Reductions, over the proxies:

    - ``mean``: ``loss`` above (the paper's, ``0`` for an empty batch);
    - ``sum``: ``sum_p (pos[p] + neg[p])``;
    - ``none``: the per-proxy losses ``pos[p] + neg[p]``, ``[num_classes]``.

    ``last_logs["accuracy"]`` (every forward pass) is the share of the batch whose most similar proxy is its
    label's.

    Args:
        num_classes: Number of classes in the train set (proxies).
        in_features: Input feature size (the extractor's ``feat_dim``).
        margin: The similarity margin ``delta`` (``>= 0``).
        alpha: The scale of the similarities (``> 0``).
        reduction: ``mean``, ``sum`` or ``none``, as above.
        generator: Random generator of the proxies' initialisation; the global one if ``None``, as for any
            ``nn.Module``.

    Raises:
        ValueError: a size is not a positive int, ``margin`` is not a non-negative number, ``alpha`` is not a
            positive number, or ``reduction`` is unknown.
    """

    criterion_name = "proxy_anchor"

    def __init__(
        self,
        num_classes: int,
        in_features: int,
        margin: float = 0.1,
        alpha: float = 32.0,
        reduction: str = "mean",
        *,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.num_classes = check_size(num_classes, "num_classes")
        self.in_features = check_size(in_features, "in_features")
        self.margin = check_non_negative(margin, "margin")
        self.alpha = check_positive(alpha, "alpha")
        self.reduction = check_reduction(reduction)
        self.proxies = nn.Parameter(torch.empty(num_classes, in_features))
        nn.init.kaiming_normal_(self.proxies, mode="fan_out", generator=generator)
        self.last_logs: dict[str, Any] = {}

    def forward(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        """Return the loss.

        Args:
            features: Features ``[batch_size, in_features]``.
            labels: Integer labels ``[batch_size]`` in ``[0, num_classes)``.

        Returns:
            A scalar for ``mean``/``sum``, the per-proxy losses ``[num_classes]`` for ``none``.

        Raises:
            ValueError: ``features`` is not ``[batch_size, in_features]``, ``labels`` is not ``[batch_size]``,
                or a label is out of ``[0, num_classes)``.
            TypeError: the labels are not integers.
        """
        labels = check_batch(features, labels)
        if features.shape[1] != self.in_features:
            raise ValueError(
                f"features must be [batch_size, {self.in_features}], got the shape {tuple(features.shape)}"
            )
        if len(labels) and not (0 <= int(labels.min()) and int(labels.max()) < self.num_classes):
            raise ValueError(
                f"labels must be in [0, {self.num_classes}), got the range [{int(labels.min())}, {int(labels.max())}]"
            )
        cos = cosine_similarities(features, self.proxies)
        pos_mask = F.one_hot(labels, self.num_classes).bool()
        with torch.no_grad():
            accuracy = float((cos.argmax(dim=1) == labels).float().mean()) if len(labels) else 0.0
        self.last_logs = {"accuracy": accuracy}
        pos = log1p_sum_exp(-self.alpha * (cos - self.margin), pos_mask, dim=0)
        neg = log1p_sum_exp(self.alpha * (cos + self.margin), ~pos_mask, dim=0)
        if self.reduction == "none":
            return pos + neg
        if self.reduction == "sum":
            return pos.sum() + neg.sum()
        n_with_pos = pos_mask.any(dim=0).sum().clamp(min=1)
        return pos.sum() / n_with_pos + neg.sum() / self.num_classes


__all__ = ["ProxyAnchorLoss"]
