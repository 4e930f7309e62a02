"""The optional dependencies of this plugin: timm (``pip install "oml-models[vit]"``), open_clip
(``pip install "oml-models[clip]"``), albumentations for OML's ``*_albu`` transforms (``"oml-models[albu]"``) and
OpenCV for OML's ``imread_cv2`` (``"oml-models[cv2]"``); ``oml-models[all]`` installs timm and open_clip.

The ResNet extractor, the pairwise models, the torchvision transforms and the zoo need none of them. The modules of the
extractors that do import their library through :func:`requires_extra`, so a missing one fails with one line
that names the extra to install instead of a bare ``No module named 'timm'``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

#: The importable module of each optional dependency -> (its distribution on PyPI, the extra that installs it).
EXTRAS: dict[str, tuple[str, str]] = {
    "timm": ("timm", "vit"),
    "open_clip": ("open_clip_torch", "clip"),
    "albumentations": ("albumentations", "albu"),
    "cv2": ("opencv-python-headless", "cv2"),
}


class MissingExtraError(ModuleNotFoundError, ValueError):
    """An optional dependency of a component is not installed; the message names the extra to install.

    A ``ModuleNotFoundError`` for the code that imports the component, and a ``ValueError`` for the pipelines,
    which report a component that refuses to build in one line (``build_component``).
    """


@contextmanager
def requires_extra(module: str, component: str) -> Iterator[None]:
    """Turn a ``ModuleNotFoundError`` raised in the block into a :class:`MissingExtraError` naming the extra.

    Args:
        module: The optional dependency the block imports, a key of :data:`EXTRAS` (``"timm"``).
        component: What needs it, for the message (``"the extractor 'vit'"``).

    Raises:
        MissingExtraError: ``the extractor 'vit' needs timm: pip install "oml-models[vit]"`` (with the name of
            the missing module when it is a dependency of ``module`` rather than ``module`` itself).
        KeyError: ``module`` is not a key of :data:`EXTRAS`.
    """
    distribution, extra = EXTRAS[module]
    try:
        yield
    except ModuleNotFoundError as e:
        if isinstance(e, MissingExtraError):
            raise
        missing = "" if e.name in (None, module) else f" (no module named {e.name!r})"
        raise MissingExtraError(
            f'{component} needs {distribution}{missing}: pip install "oml-models[{extra}]"', name=e.name
        ) from e


__all__ = ["EXTRAS", "MissingExtraError", "requires_extra"]
