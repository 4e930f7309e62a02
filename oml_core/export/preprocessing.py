"""The image preprocessing that a caller of an export must apply, described from the transforms of its source.

The transforms are the registered ones of the source's config (or of a zoo key's entry): a pipeline of steps (a
``Compose``'s ``transforms``, or one callable). Each step is described by its class name and the attributes that
define a preprocessing (:data:`STEP_ATTRIBUTES`: sizes, interpolation, mean, std, padding colour); the summary
(``image_size``, ``mean``, ``std``, ``interpolation``) is taken from them: the size of the last step that sets a
square size, the mean and std of the last normalisation, the interpolation of the first resize.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from torch import Tensor

#: The attributes of a transform step that define what it does to an image.
STEP_ATTRIBUTES = ("size", "im_size", "max_size", "interpolation", "antialias", "mean", "std", "fill")


def describe_image_transforms(transforms: Any, spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """The preprocessing of images by ``transforms`` (built from ``spec``): ``{"transforms": spec, "steps":
    [{"type": class name, <attribute>: value, ...}], "image_size": int | None, "mean": [3 floats] | None, "std":
    ... | None, "interpolation": str | None}`` in JSON values."""
    steps = [_describe_step(step) for step in getattr(transforms, "transforms", [transforms])]
    sizes = [size for step in steps if (size := _square_size(step)) is not None]
    normalisations = [step for step in steps if "mean" in step and "std" in step]
    interpolations = [step["interpolation"] for step in steps if "interpolation" in step]
    return {
        "transforms": dict(spec) if spec is not None else None,
        "steps": steps,
        "image_size": sizes[-1] if sizes else None,
        "mean": normalisations[-1]["mean"] if normalisations else None,
        "std": normalisations[-1]["std"] if normalisations else None,
        "interpolation": interpolations[0] if interpolations else None,
    }


def _describe_step(step: Any) -> dict[str, Any]:
    described: dict[str, Any] = {"type": type(step).__name__}
    for name in STEP_ATTRIBUTES:
        if hasattr(step, name):
            described[name] = json_value(getattr(step, name))
    return described


def _square_size(step: Mapping[str, Any]) -> int | None:
    """The side that ``step`` makes an image: an int ``im_size``/``size`` (a resize of the shorter side to an
    int ``size`` is followed by a crop that sets the square), or a ``[side, side]`` ``size``."""
    for name in ("im_size", "size"):
        value = step.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, list) and len(value) == 2 and value[0] == value[1] and isinstance(value[0], int):
            return int(value[0])
    return None


def json_value(value: Any) -> Any:
    """``value`` as JSON values: tensors and tuples as (flat) lists, enums as their value, anything else that is
    not a JSON scalar as its ``repr``."""
    if isinstance(value, Tensor):  # float32 values, written with the digits float32 holds
        return [float(f"{x:.8g}") for x in value.detach().reshape(-1).tolist()]
    if isinstance(value, enum.Enum):
        return json_value(value.value)
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


__all__ = ["STEP_ATTRIBUTES", "describe_image_transforms", "json_value"]
