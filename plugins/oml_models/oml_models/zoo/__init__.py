"""The pretrained zoo of this plugin: one table per family, every row a ``PretrainedModel`` factory (url, md5,
constructor arguments, transforms, converter), registered by :mod:`oml_models.plugin`.

The tables import no torch module: listing the zoo is cheap; the converters they name are imported when a
checkpoint is loaded.
"""

from __future__ import annotations

from collections.abc import Callable

from oml_core.zoo import PretrainedModel
from oml_models.zoo import clip, mlp, resnet, unicom, vit

#: Every checkpoint of the plugin: ``{key: factory of its PretrainedModel}``.
PRETRAINED: dict[str, Callable[[], PretrainedModel]] = {
    **resnet.ZOO,
    **vit.ZOO,
    **clip.ZOO,
    **unicom.ZOO,
    **mlp.ZOO,
}

#: Other names of some keys: ``{key: aliases}``.
ALIASES: dict[str, tuple[str, ...]] = {**unicom.ALIASES}

__all__ = ["ALIASES", "PRETRAINED"]
