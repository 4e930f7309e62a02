"""Pairwise models (OML's ``oml.models.meta.siamese``): they score a pair of inputs with one number.

* :class:`LinearTrivialDistanceSiamese`: the L2 distance of two embeddings after a shared linear map.
* :class:`TrivialDistanceSiamese`: the L2 distance of the embeddings an extractor gives to two inputs.
* :class:`ConcatSiamese`: two images concatenated into one, an extractor and an MLP head give a logit.

The distance models return distances (smaller: more similar) from both ``forward`` and ``predict``;
:class:`ConcatSiamese` returns logits from ``forward`` (for ``BCEWithLogitsLoss`` with the target
``is_negative_pair``) and their sigmoids from ``predict``, so that it also scores "larger: less similar".
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from oml_core.interfaces.models import IExtractor, IFreezable, IPairwiseModel
from oml_core.utils.checkpoints import WRAPPER_PREFIXES, load_checkpoint
from oml_core.utils.misc_torch import elementwise_dist

#: Prefixes stripped from the keys of a :class:`ConcatSiamese` or :class:`TrivialDistanceSiamese` checkpoint: a
#: Lightning module's ``model.`` and DDP's ``module.``; never ``extractor.``, which starts the siamese's own keys.
_SIAMESE_WRAPPERS = tuple(p for p in WRAPPER_PREFIXES if p != "extractor.")

#: Dropout probability after every hidden layer of :class:`ConcatSiamese`'s head (OML's value).
HEAD_DROPOUT = 0.5


def _check_real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(value)


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


def _check_extractor(extractor: object) -> IExtractor:
    if not isinstance(extractor, IExtractor):
        raise TypeError(
            f"extractor must be an instance of oml_core.interfaces.models.IExtractor, "
            f"got {type(extractor).__name__}"
        )
    return extractor


class LinearTrivialDistanceSiamese(IPairwiseModel):
    """The L2 distance of two embeddings after one shared linear projection (a tool for development).

    ``forward(x1, x2)[i] = ||W x1[i] - W x2[i]||_2 + output_bias`` with ``W`` the ``[feat_dim, feat_dim]``
    weight of :attr:`proj` (no bias). ``predict`` is ``forward``.

    Args:
        feat_dim: Size of each input embedding.
        identity_init: Start from ``W = I``, so that the model returns the L2 distance of the original
            embeddings; otherwise ``W`` has PyTorch's default ``nn.Linear`` initialisation.
        output_bias: A constant added to every output (OML's newer argument; 0 leaves the distances as is).

    Raises:
        ValueError: ``feat_dim`` is not a positive int.
        TypeError: ``identity_init`` is not a bool, ``output_bias`` not a real number.
    """

    def __init__(self, feat_dim: int, identity_init: bool, output_bias: float = 0) -> None:
        if isinstance(feat_dim, bool) or not isinstance(feat_dim, int) or feat_dim < 1:
            raise ValueError(f"feat_dim must be a positive int, got {feat_dim!r}")
        _check_bool("identity_init", identity_init)
        super().__init__()
        self.feat_dim = feat_dim
        self.output_bias = _check_real("output_bias", output_bias)
        self.proj = nn.Linear(feat_dim, feat_dim, bias=False)
        if identity_init:
            nn.init.eye_(self.proj.weight)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """Distances ``[batch_size]`` between the projected embeddings ``x1``, ``x2`` of shape
        ``[batch_size, feat_dim]``.

        Raises:
            ValueError: ``x1`` or ``x2`` is not ``[batch_size, feat_dim]``, or their shapes differ.
        """
        for name, x in (("x1", x1), ("x2", x2)):
            if x.ndim != 2 or x.shape[1] != self.feat_dim:
                raise ValueError(
                    f"{name} must be [batch_size, feat_dim={self.feat_dim}], got {tuple(x.shape)}"
                )
        return elementwise_dist(self.proj(x1), self.proj(x2), p=2) + self.output_bias

    def predict(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The same as :meth:`forward`: distances, no activation."""
        return self.forward(x1, x2)


class TrivialDistanceSiamese(IPairwiseModel):
    """The L2 distance of the embeddings that an extractor gives to two inputs (a tool for development).

    ``forward(x1, x2)[i] = ||extractor(x1)[i] - extractor(x2)[i]||_2 + output_bias``; ``predict`` is
    ``forward``. Trained with ``BCEWithLogitsLoss`` against ``is_negative_pair`` (as
    ``postprocessor_training_pipeline`` does), the distance is the logit: the extractor is fine-tuned to bring
    the images of a positive pair together and to push those of a negative pair apart.

    Args:
        extractor: Instance of ``IExtractor`` (e.g. ``ResnetExtractor``).
        output_bias: A constant added to every output (OML's newer argument; 0 leaves the distances as is).
        weights: Path to a local checkpoint of the whole siamese (its ``extractor.*`` keys; a Lightning
            checkpoint such as the ``best.ckpt`` of ``oml train-postprocessor``, or ``model.`` / ``module.``
            prefixes, are handled), loaded strictly; ``None`` keeps the extractor's weights. An addition to
            OML's signature, as :class:`ConcatSiamese`'s ``weights``.

    Raises:
        TypeError: ``extractor`` is not an ``IExtractor``, ``output_bias`` not a real number.
        FileNotFoundError: ``weights`` is not an existing file.
        oml_core.utils.checkpoints.CheckpointError: the checkpoint cannot be read or does not fit the model.
    """

    def __init__(
        self, extractor: IExtractor, output_bias: float = 0, weights: str | Path | None = None
    ) -> None:
        _check_extractor(extractor)
        super().__init__()
        self.extractor = extractor
        self.output_bias = _check_real("output_bias", output_bias)
        if weights is not None:
            load_checkpoint(self, weights, prefixes=_SIAMESE_WRAPPERS)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """Distances ``[batch_size]`` between the embeddings of ``x1`` and ``x2`` (batches of inputs of the
        extractor)."""
        return elementwise_dist(self.extractor(x1), self.extractor(x2), p=2) + self.output_bias

    def predict(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The same as :meth:`forward`: distances, no activation."""
        return self.forward(x1, x2)


def _concat_head(in_features: int, hidden_dims: Sequence[int]) -> nn.Sequential:
    """OML's head of ``ConcatSiamese`` (the layout of torchvision's ``MLP`` with a sigmoid activation, so
    that OML's checkpoints load): ``[Linear(d_k, d_k+1), Sigmoid, Dropout(0.5)]`` for every hidden size,
    then ``Linear(d_last, 1, bias=False)`` and ``Identity`` (the place of the removed last dropout)."""
    dims = [in_features, *hidden_dims]
    layers: list[nn.Module] = []
    for d_in, d_out in zip(dims[:-1], dims[1:]):
        layers += [nn.Linear(d_in, d_out), nn.Sigmoid(), nn.Dropout(HEAD_DROPOUT)]
    layers += [nn.Linear(dims[-1], 1, bias=False), nn.Identity()]
    return nn.Sequential(*layers)


class ConcatSiamese(IPairwiseModel, IFreezable):
    """Concatenates two images into one, passes it through a backbone and applies an MLP head.

    ``forward(x1, x2) = head(extractor(cat([x1, x2], dim=2)))`` -> logits ``[batch_size]``: for images
    ``[B, C, H, W]`` the pair becomes one image ``[B, C, 2H, W]``, ``x1`` on top of ``x2`` (OML's
    ``torch.concat(..., dim=2)``), so the extractor must accept that size (a CNN or a ViT with interpolated
    positional embeddings). The head is ``[Linear, Sigmoid, Dropout(0.5)]`` per hidden size, then a
    ``Linear(., 1)`` without bias. Train ``forward`` with ``BCEWithLogitsLoss`` against ``is_negative_pair``.

    ``predict(x1, x2) = sigmoid(forward(x1, x2))`` in ``[0, 1]`` (larger: less similar); with ``use_tta``,
    ``(sigmoid(forward(x1, x2)) + sigmoid(forward(x2, x1))) / 2``, which is symmetric in ``x1, x2``.

    ``freeze()`` stops the gradients of the backbone (OML's ``train_backbone = False``): the extractor then
    runs without autograd, so its parameters get no gradient and only the head is trained; the
    ``requires_grad`` flags of the parameters are left unchanged. ``unfreeze()`` restores the gradients.
    The extractor never records a graph when autograd is off around the call (``torch.no_grad()``).

    Args:
        extractor: Instance of ``IExtractor`` (e.g. ``ResnetExtractor``); its ``feat_dim`` is the head's input.
        mlp_hidden_dims: Hidden sizes of the head (may be empty: a single linear layer).
        use_tta: Average the predictions of both orders of the pair; affects only :meth:`predict`.
        weights: Path to a local checkpoint of the whole siamese (``extractor.*`` and ``head.*`` keys; a
            Lightning checkpoint or ``model.`` / ``module.`` prefixes are handled), loaded strictly; ``None``
            keeps the extractor's weights and a random head.

    Raises:
        TypeError: ``extractor`` is not an ``IExtractor``, ``use_tta`` not a bool.
        ValueError: ``mlp_hidden_dims`` is not a sequence of positive ints.
        FileNotFoundError: ``weights`` is not an existing file.
        oml_core.utils.checkpoints.CheckpointError: the checkpoint cannot be read or does not fit the model.
    """

    def __init__(
        self,
        extractor: IExtractor,
        mlp_hidden_dims: list[int],
        use_tta: bool = False,
        weights: str | Path | None = None,
    ) -> None:
        _check_extractor(extractor)
        if isinstance(mlp_hidden_dims, (str, bytes)) or not isinstance(mlp_hidden_dims, Sequence):
            raise ValueError(f"mlp_hidden_dims must be a list of positive ints, got {mlp_hidden_dims!r}")
        for dim in mlp_hidden_dims:
            if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
                raise ValueError(
                    f"mlp_hidden_dims must hold positive ints only, got {list(mlp_hidden_dims)!r}"
                )
        super().__init__()
        self.extractor = extractor
        self.use_tta = _check_bool("use_tta", use_tta)
        self.head = _concat_head(extractor.feat_dim, mlp_hidden_dims)
        self.train_backbone = True
        if weights is not None:
            load_checkpoint(self, weights, prefixes=_SIAMESE_WRAPPERS)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """Logits ``[batch_size]`` of the pairs of images ``x1``, ``x2`` (``[B, C, H, W]``, equal but in ``H``).

        Raises:
            ValueError: the inputs have fewer than 3 dimensions, or sizes that differ outside dimension 2.
        """
        if x1.ndim < 3 or x1.ndim != x2.ndim or x1.shape[:2] != x2.shape[:2] or x1.shape[3:] != x2.shape[3:]:
            raise ValueError(
                f"x1 and x2 must be batches of images of one size (but in dimension 2, where they are "
                f"concatenated), got {tuple(x1.shape)} and {tuple(x2.shape)}"
            )
        x = torch.cat([x1, x2], dim=2)
        with torch.set_grad_enabled(self.train_backbone and torch.is_grad_enabled()):
            x = self.extractor(x)
        return self.head(x).squeeze(1)

    def predict(self, x1: Tensor, x2: Tensor) -> Tensor:
        """Probabilities ``[batch_size]`` that the pairs are negative: ``sigmoid`` of the logits, averaged
        over both orders of the pair when ``use_tta``."""
        probs = torch.sigmoid(self.forward(x1, x2))
        if self.use_tta:
            probs = (probs + torch.sigmoid(self.forward(x2, x1))) / 2
        return probs

    def freeze(self) -> None:
        """Stop the gradients through the extractor: only the head is trained."""
        self.train_backbone = False

    def unfreeze(self) -> None:
        """Let the gradients flow through the extractor again."""
        self.train_backbone = True


__all__ = ["ConcatSiamese", "LinearTrivialDistanceSiamese", "TrivialDistanceSiamese"]
