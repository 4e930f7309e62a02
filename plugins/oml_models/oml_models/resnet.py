"""ResNet extractors built on torchvision's ResNets (weights are never downloaded here)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.models import ResNet, resnet18, resnet34, resnet50, resnet101, resnet152

from oml_core.interfaces.models import IExtractor
from oml_core.utils.checkpoints import load_checkpoint
from oml_models.pooling import gem_or_avg_pool


class ResnetExtractor(IExtractor):
    """The extractors that follow the ResNet architecture (torchvision's ``resnet18`` ... ``resnet152``).

    ``forward(x)`` maps images ``[B, 3, H, W]`` to embeddings ``[B, feat_dim]``: the ResNet trunk, then the
    pooling (GeM with power ``gem_p``, or average pooling when ``gem_p`` is None or 1), then the ImageNet
    ``fc`` layer unless ``remove_fc``, then L2 normalisation if ``normalise_features``.

    ``feat_dim`` is the backbone's width (512 for resnet18/34, 2048 for resnet50/101/152) with
    ``remove_fc=True``, else the output size of ``fc`` (1000).

    Args:
        weights: ``None`` for a random initialisation; a path to a local checkpoint file (a state dict of the
            torchvision ResNet, of this extractor, or a Lightning checkpoint holding one: the prefixes
            ``model.``, ``extractor.``, ``module.`` are stripped, ``criterion.*`` keys and, with
            ``remove_fc``, ``fc.*`` keys are ignored); or a key of :attr:`pretrained_models`.
        arch: One of the keys of :attr:`constructors`.
        gem_p: Power of the Generalized Mean pooling that replaces the average pooling (``None`` or ``1``:
            plain average pooling; ``p -> inf``: max pooling).
        remove_fc: Remove the last fully connected layer (embeddings are the pooled features).
        normalise_features: L2-normalise the output embeddings.

    Raises:
        ValueError: unknown ``arch`` (the known ones are listed).
        KeyError: ``weights`` is a string that is neither an existing file nor a key of
            :attr:`pretrained_models`.
        FileNotFoundError: ``weights`` is a ``Path`` that does not exist.
        oml_core.utils.checkpoints.CheckpointError: the checkpoint cannot be read or does not fit the model.
    """

    #: Constructors of the supported architectures (called with ``weights=None``: nothing is downloaded).
    constructors: dict[str, Callable[..., ResNet]] = {
        "resnet18": resnet18,
        "resnet34": resnet34,
        "resnet50": resnet50,
        "resnet101": resnet101,
        "resnet152": resnet152,
    }

    #: The pretrained zoo of this extractor: empty until the zoo is available.
    pretrained_models: dict[str, Any] = {}

    def __init__(
        self,
        weights: str | Path | None,
        arch: str,
        gem_p: float | None,
        remove_fc: bool,
        normalise_features: bool,
    ) -> None:
        if arch not in self.constructors:
            known = ", ".join(self.constructors)
            raise ValueError(
                f"Unknown ResNet arch {arch!r}; known archs (ResnetExtractor.constructors): {known}"
            )
        super().__init__()
        self.arch = arch
        self.gem_p = gem_p
        self.remove_fc = remove_fc
        self.normalise_features = normalise_features

        self.model: ResNet = self.constructors[arch](weights=None)
        self.model.avgpool = gem_or_avg_pool(gem_p)
        self._feat_dim = self.model.fc.in_features if remove_fc else self.model.fc.out_features
        if remove_fc:
            self.model.fc = nn.Identity()

        if weights is not None:
            self._load_weights(weights)

    def _load_weights(self, weights: str | Path) -> None:
        if isinstance(weights, str) and not Path(weights).is_file():
            known = (
                ", ".join(sorted(self.pretrained_models)) or "(none: the pretrained zoo is not available yet)"
            )
            raise KeyError(
                f"ResnetExtractor weights {weights!r} is neither an existing checkpoint file nor a key of "
                f"ResnetExtractor.pretrained_models; known keys: {known}"
            )
        ignore = ("criterion.", "fc.") if self.remove_fc else ("criterion.",)
        load_checkpoint(self.model, weights, ignore=ignore)

    def forward(self, x: Tensor) -> Tensor:
        """Embeddings ``[B, feat_dim]`` of images ``x`` of shape ``[B, 3, H, W]`` (L2-normalised if asked)."""
        x = self.model(x)
        if self.normalise_features:
            x = F.normalize(x, p=2, dim=1)
        return x

    @property
    def feat_dim(self) -> int:
        """Size of the embeddings: the backbone's width with ``remove_fc``, else the ``fc`` output (1000)."""
        return self._feat_dim


__all__ = ["ResnetExtractor"]
