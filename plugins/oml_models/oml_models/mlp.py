"""``ExtractorWithMLP``: an extractor with an MLP head on top of its embeddings (OML's
``oml.models.meta.projection.ExtractorWithMLP``), and the converter of OML's checkpoints of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torchvision.ops import MLP

from oml_core.interfaces.export import ExportContext, ExportSignature, IExportable
from oml_core.interfaces.models import IExtractor, IFreezable
from oml_core.utils.checkpoints import drop_keys, strip_prefixes
from oml_core.zoo.extractor import ZooExtractor
from oml_core.zoo.weights import load_weights

#: Prefixes that wrap an ``ExtractorWithMLP``'s keys in a checkpoint (a LightningModule's ``model.``, DDP's
#: ``module.``); never the start of its own keys (``extractor.*``, ``projection.*``).
MLP_WRAPPER_PREFIXES = ("model.", "module.")
#: Keys of a training checkpoint that are not the model's (the loss's parameters).
CRITERION_PREFIXES = ("criterion.",)


def _build_extractor(extractor: IExtractor | Mapping[str, Any]) -> IExtractor:
    """``extractor`` itself, or the extractor built from its ``{name, args}`` spec by the default registry."""
    if isinstance(extractor, IExtractor):
        return extractor
    if isinstance(extractor, Mapping) and isinstance(extractor.get("name"), str):
        from oml_core.registry import default_registry

        return default_registry().build("extractor", dict(extractor))
    raise TypeError(
        f"extractor must be an IExtractor or an extractor's {{name, args}} spec, got {type(extractor).__name__}"
    )


def _check_mlp_features(mlp_features: Sequence[int]) -> list[int]:
    sizes = list(mlp_features) if isinstance(mlp_features, Sequence) else []
    if not sizes or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        raise ValueError(f"mlp_features must be a non-empty list of positive ints, got {mlp_features!r}")
    return sizes


class ExtractorWithMLP(ZooExtractor, IFreezable, IExportable):
    """An extractor followed by an MLP head: ``forward(x) = projection(extractor(x))``.

    The head is torchvision's ``MLP(extractor.feat_dim, mlp_features)``: for every size but the last a
    ``Linear``, ``ReLU`` and ``Dropout(0)``, then a last ``Linear`` (no activation) and ``Dropout(0)``; its
    keys are ``projection.0.*``, ``projection.3.*``, ... as in OML's checkpoints. ``feat_dim`` is
    ``mlp_features[-1]``.

    Training the backbone (OML's semantics, plus ``requires_grad``): with ``train_backbone=False`` the
    extractor runs under ``torch.no_grad()`` and its parameters have ``requires_grad=False``, so only the
    head is trained; with ``True`` the extractor's parameters have ``requires_grad=True`` and the extractor
    runs in the caller's grad mode. :meth:`freeze` sets ``train_backbone=False`` and :meth:`unfreeze` sets it
    to ``True`` (whatever the constructor was given), each with its ``requires_grad``. The head's parameters
    are never frozen, and the extractor's own ``requires_grad`` flags are overwritten. As in OML, freezing does
    not switch the backbone to eval mode (its batch norms, if any, keep updating their statistics in training).
    Unlike OML, calling the model under ``torch.no_grad()`` never builds a graph.

    Args:
        extractor: The backbone: an instance of ``IExtractor`` (e.g. ``ViTExtractor``), or its
            ``{name, args}`` spec, built by the default registry (the registry builds such a spec of a config
            itself before calling this class).
        mlp_features: Sizes of the projection layers.
        weights: ``None`` for the head's random initialisation (the backbone keeps its own weights); a path to
            a checkpoint of the whole model (its state dict, or a Lightning checkpoint: ``model.``/``module.``
            prefixes stripped, ``criterion.*`` keys dropped); or a key of the pretrained zoo of this class.
        train_backbone: Set ``False`` to train only the MLP head.

    Raises:
        TypeError: ``extractor`` is neither an ``IExtractor`` nor a spec.
        ValueError: ``mlp_features`` is not a non-empty list of positive ints.
        FileNotFoundError, UnknownNameError, CheckpointError: see :func:`oml_core.zoo.weights.load_weights`.
    """

    def __init__(
        self,
        extractor: IExtractor | Mapping[str, Any],
        mlp_features: list[int],
        weights: str | Path | None = None,
        train_backbone: bool = False,
    ) -> None:
        super().__init__()
        self.mlp_features = _check_mlp_features(mlp_features)
        self.extractor = _build_extractor(extractor)
        self.projection = MLP(self.extractor.feat_dim, self.mlp_features)
        self._set_train_backbone(train_backbone)
        load_weights(self, weights, ignore=CRITERION_PREFIXES, prefixes=MLP_WRAPPER_PREFIXES)

    def _set_train_backbone(self, train_backbone: bool) -> None:
        self.train_backbone = train_backbone
        self.extractor.requires_grad_(train_backbone)

    def forward(self, x: Tensor) -> Tensor:
        """``projection(extractor(x))``: embeddings ``[B, mlp_features[-1]]``."""
        if self.train_backbone:
            features = self.extractor(x)
        else:
            with torch.no_grad():
                features = self.extractor(x)
        return self.projection(features)

    @property
    def feat_dim(self) -> int:
        """The last size of ``mlp_features``."""
        return self.mlp_features[-1]

    def freeze(self) -> None:
        """Train the head only: ``train_backbone = False``, the extractor's ``requires_grad`` off."""
        self._set_train_backbone(False)

    def unfreeze(self) -> None:
        """Train the backbone too: ``train_backbone = True``, the extractor's ``requires_grad`` on."""
        self._set_train_backbone(True)

    def export_signature(self, context: ExportContext) -> ExportSignature:
        """The signature of :attr:`extractor` (its inputs and preprocessing), the whole model traced.

        Raises:
            ValueError: the backbone is not exportable, or is traced through a module of its own.
        """
        if not isinstance(self.extractor, IExportable):
            raise ValueError(f"its backbone {type(self.extractor).__name__} states no export signature")
        signature = self.extractor.export_signature(context)
        if signature.module is not self.extractor:
            raise ValueError(
                f"its backbone {type(self.extractor).__name__} is traced through a module of its own, which the "
                f"MLP head cannot wrap"
            )
        return replace(signature, module=self)


def oml_checkpoint_to_extractor_with_mlp(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A checkpoint of OML's ``ExtractorWithMLP`` (its state dict, or its Lightning module's:
    ``model.extractor.*``, ``model.projection.*``, ``criterion.*``) to this class's state dict: the loss's
    ``criterion.*`` keys dropped, the wrapper prefixes ``model.``/``module.`` stripped (the converter of the
    zoo's ``*_mlp_*`` checkpoints)."""
    return strip_prefixes(drop_keys(state_dict, CRITERION_PREFIXES), MLP_WRAPPER_PREFIXES)


__all__ = ["ExtractorWithMLP", "oml_checkpoint_to_extractor_with_mlp"]
