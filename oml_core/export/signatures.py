"""The export signatures that several plugins' extractors share (:class:`~oml_core.interfaces.export.IExportable`):
images ``[batch, 3, S, S]``. A plugin's extractor returns :func:`image_signature` from its ``export_signature``."""

from __future__ import annotations

import torch
from torch import Generator, Tensor, nn

from oml_core.interfaces.export import BATCH_AXIS, ExportContext, ExportSignature

#: The name of the input of an image extractor's graph.
IMAGES_INPUT = "images"


def image_signature(
    module: nn.Module, context: ExportContext, native_size: int, fixed_size: bool = False
) -> ExportSignature:
    """The signature of an extractor of RGB images: one float32 input ``images`` ``[batch, 3, S, S]``, ``S`` the
    ``image_size`` of the source's transforms (``native_size``, the model's own, when they set none); the
    preprocessing is the transforms' description (:func:`~oml_core.export.preprocessing.describe_image_transforms`)
    with the layout of the input.

    Args:
        module: The extractor.
        context: The export's context (its ``images``: the transforms' description, or None).
        native_size: The side of the images the model is built for.
        fixed_size: The model takes images of ``native_size`` only (CLIP, Unicom).

    Raises:
        ValueError: ``fixed_size`` and transforms that make images of another size.
    """
    images = dict(context.images or {})
    size = images.get("image_size") or native_size
    if fixed_size and size != native_size:
        raise ValueError(
            f"{type(module).__name__} takes images of {native_size}x{native_size} px, its transforms make "
            f"{size}x{size}"
        )

    def example_inputs(batch_size: int, generator: Generator) -> tuple[Tensor, ...]:
        return (torch.randn((batch_size, 3, size, size), generator=generator),)

    preprocessing = {
        "modality": "images",
        "input": f"float32 [batch, 3, {size}, {size}]: RGB, scaled to [0, 1], minus mean, divided by std",
        **images,
        "image_size": size,
    }
    return ExportSignature(
        module=module,
        input_names=(IMAGES_INPUT,),
        dynamic_axes={IMAGES_INPUT: {0: BATCH_AXIS}},
        example_inputs=example_inputs,
        preprocessing=preprocessing,
    )


__all__ = ["IMAGES_INPUT", "image_signature"]
