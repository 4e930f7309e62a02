"""ResNet extractors built on torchvision's ResNets (weights are never downloaded by torchvision here)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch.nn.functional as F
from PIL import Image
from torch import Tensor, nn
from torchvision.models import ResNet, resnet18, resnet34, resnet50, resnet101, resnet152

from oml_core.export.signatures import image_signature
from oml_core.interfaces.export import ExportContext, ExportSignature, IExportable
from oml_core.utils.checkpoints import drop_keys, load_state_dict_strict
from oml_core.utils.images import to_rgb8
from oml_core.zoo.extractor import ZooExtractor
from oml_core.zoo.weights import build_for_weights, load_weights
from oml_models.archs import check_arch
from oml_models.gradcam import grad_cam, overlay_heatmap
from oml_models.pooling import gem_or_avg_pool
from oml_models.transforms import get_normalisation_torch

#: The side of the images the torchvision ResNets are trained on (an export's size without transforms).
NATIVE_IMAGE_SIZE = 224


def resnet50_projector(weights: None = None) -> ResNet:
    """torchvision's ResNet-50 whose ``fc`` is MoCo v2's projection head: ``Linear(2048, 2048)``, ``ReLU``,
    ``Linear(2048, 128)`` (keys ``fc.0.*`` and ``fc.2.*``, as in MoCo's release)."""
    model = resnet50(weights=weights)
    width = model.fc.in_features
    model.fc = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 128))
    return model


def _image_to_array(image: np.ndarray | Image.Image) -> np.ndarray:
    """An ``HxWx3`` uint8 RGB array of a PIL image or of such an array (``image`` must be one of these)."""
    if isinstance(image, Image.Image):
        return np.array(to_rgb8(image))
    if isinstance(image, np.ndarray) and image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.uint8:
        return image
    raise TypeError(
        f"image must be a PIL image or an HxWx3 uint8 array with values in [0, 255], got "
        f"{type(image).__name__} {getattr(image, 'dtype', '')} {getattr(image, 'shape', '')}"
    )


class ResnetExtractor(ZooExtractor, IExportable):
    """The extractors that follow the ResNet architecture (torchvision's ``resnet18`` ... ``resnet152``).

    ``forward(x)`` maps images ``[B, 3, H, W]`` to embeddings ``[B, feat_dim]``: the ResNet trunk, then the
    pooling (GeM with power ``gem_p``, or average pooling when ``gem_p`` is None or 1), then the ``fc`` head
    unless ``remove_fc``, then L2 normalisation if ``normalise_features``.

    ``feat_dim`` is the backbone's width (512 for resnet18/34, 2048 for the others) with ``remove_fc=True``,
    else the output size of ``fc`` (1000; 128 for ``resnet50_projector``).

    Args:
        weights: ``None`` for a random initialisation; a path to a local checkpoint file (a state dict of the
            torchvision ResNet, of this extractor, or a Lightning checkpoint holding one: the prefixes
            ``model.``, ``extractor.``, ``module.`` are stripped, ``criterion.*`` keys and, with
            ``remove_fc``, ``fc.*`` keys are ignored); or a key of the pretrained zoo
            (:attr:`pretrained_models`, ``oml registry pretrained``), loaded with :meth:`load_pretrained`.
        arch: One of the keys of :attr:`constructors`.
        gem_p: Power of the Generalized Mean pooling that replaces the average pooling (``None`` or ``1``:
            plain average pooling; ``p -> inf``: max pooling).
        remove_fc: Remove the last fully connected layer (embeddings are the pooled features). Note that
            :meth:`draw_gradcam` needs that layer.
        normalise_features: L2-normalise the output embeddings.

    Raises:
        ValueError: unknown ``arch`` (the known ones are listed).
        UnknownNameError: ``weights`` is a string that is neither a file nor a key of the zoo.
        FileNotFoundError: ``weights`` is a path that does not exist.
        PretrainedDownloadError: the zoo's file is not in the cache and cannot be downloaded.
        CheckpointError: the checkpoint cannot be read or does not fit the model.
    """

    #: Constructors of the supported architectures (called with ``weights=None``: nothing is downloaded).
    constructors: dict[str, Callable[..., ResNet]] = {
        "resnet18": resnet18,
        "resnet34": resnet34,
        "resnet50": resnet50,
        "resnet50_projector": resnet50_projector,
        "resnet101": resnet101,
        "resnet152": resnet152,
    }

    def __init__(
        self,
        weights: str | Path | None,
        arch: str,
        gem_p: float | None,
        remove_fc: bool,
        normalise_features: bool,
    ) -> None:
        check_arch(arch, ResnetExtractor)
        super().__init__()
        self.arch = arch
        self.gem_p = gem_p
        self.remove_fc = remove_fc
        self.normalise_features = normalise_features

        self.model: ResNet = build_for_weights(lambda: self.constructors[arch](weights=None), weights)
        self.model.avgpool = gem_or_avg_pool(gem_p)
        linears = [m for m in self.model.fc.modules() if isinstance(m, nn.Linear)]
        self._feat_dim = linears[0].in_features if remove_fc else linears[-1].out_features
        if remove_fc:
            self.model.fc = nn.Identity()

        load_weights(self, weights, target=self.model, ignore=("criterion.", *self._dropped_prefixes))

    @property
    def _dropped_prefixes(self) -> tuple[str, ...]:
        """Keys of a ResNet state dict that this extractor has no place for (``fc.*`` with ``remove_fc``)."""
        return ("fc.",) if self.remove_fc else ()

    def load_pretrained(self, state_dict: dict[str, Tensor], source: str) -> None:
        """Load a zoo checkpoint, converted to torchvision's ResNet state dict, strictly into :attr:`model`
        (its ``fc.*`` keys are dropped with ``remove_fc``).

        Raises:
            CheckpointError: missing or unexpected keys, or shapes that differ; the message names ``source``.
        """
        load_state_dict_strict(self.model, drop_keys(state_dict, self._dropped_prefixes), source)

    def forward(self, x: Tensor) -> Tensor:
        """Embeddings ``[B, feat_dim]`` of images ``x`` of shape ``[B, 3, H, W]`` (L2-normalised if asked)."""
        x = self.model(x)
        if self.normalise_features:
            x = F.normalize(x, p=2, dim=1)
        return x

    @property
    def feat_dim(self) -> int:
        """Size of the embeddings: the backbone's width with ``remove_fc``, else the ``fc`` output size."""
        return self._feat_dim

    def draw_gradcam(self, image: np.ndarray | Image.Image) -> np.ndarray | Image.Image:
        """Visualise with Grad-CAM (:func:`oml_models.gradcam.grad_cam`) where the image drives its top output.

        As OML: the image, at its own size, is normalised with ImageNet's mean and std and fed to the ResNet
        (``fc`` included, without the L2 normalisation); the Grad-CAM map of its highest output, at the last
        block of ``layer4``, is coloured with ``jet`` and blended half and half into the image
        (:func:`oml_models.gradcam.overlay_heatmap`). The model's mode and its parameters' gradients are left
        as they were.

        Args:
            image: A PIL image, or an ``HxWx3`` uint8 RGB array (values in ``[0, 255]``).

        Returns:
            The image with the heat map drawn in, of the input's size and type (``HxWx3`` uint8 array, or an
            RGB PIL image for a PIL input).

        Raises:
            ValueError: the extractor was built with ``remove_fc=True``.
            TypeError: ``image`` is neither a PIL image nor an ``HxWx3`` uint8 array.
        """
        if self.remove_fc:
            raise ValueError(
                "draw_gradcam needs the fc layer: build the ResnetExtractor with remove_fc=False"
            )
        array = _image_to_array(image)
        device = next(self.model.parameters()).device
        x = get_normalisation_torch()(array).unsqueeze(0).to(device)
        mask = grad_cam(self.model, self.model.layer4[-1], x)[0].cpu().numpy()
        drawn = overlay_heatmap(array, mask)
        return Image.fromarray(drawn) if isinstance(image, Image.Image) else drawn

    def export_signature(self, context: ExportContext) -> ExportSignature:
        """Images ``[batch, 3, S, S]``, ``S`` the transforms' size (224 without one):
        :func:`~oml_core.export.signatures.image_signature`."""
        return image_signature(self, context, NATIVE_IMAGE_SIZE)


__all__ = ["NATIVE_IMAGE_SIZE", "ResnetExtractor", "resnet50_projector"]
