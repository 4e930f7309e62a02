"""The ``weights`` of an extractor: nothing, a local checkpoint file, or a key of the pretrained zoo.

``weights`` is part of every extractor's contract (:class:`~oml_core.interfaces.models.IExtractor`): an
extractor built by the registry from ``{name, args: {weights: ...}}`` gets them loaded by :func:`load_weights`,
either by the extractor itself (its constructor takes a ``weights`` argument, e.g. to load a checkpoint into its
backbone only) or by the core right after building it (its constructor does not name ``weights``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import torch
from torch import nn

from oml_core.utils.checkpoints import WRAPPER_PREFIXES, load_checkpoint, load_state_dict_strict
from oml_core.zoo.extractor import ZooExtractor
from oml_core.zoo.store import load_pretrained_state_dict

if TYPE_CHECKING:
    from oml_core.interfaces.models import IExtractor

ModuleT = TypeVar("ModuleT", bound=nn.Module)

#: Suffixes of checkpoint files: a string ending so (or holding a ``/``) is a path, never a zoo key.
CHECKPOINT_SUFFIXES = (".pth", ".pt", ".ckpt", ".tar", ".bin", ".safetensors")


def looks_like_path(weights: str) -> bool:
    """Whether the string ``weights`` is meant as a file (a ``/`` or ``\\`` in it, or a checkpoint suffix)."""
    return "/" in weights or "\\" in weights or weights.lower().endswith(CHECKPOINT_SUFFIXES)


def load_weights(
    extractor: IExtractor,
    weights: str | Path | None,
    target: nn.Module | None = None,
    ignore: Iterable[str] = ("criterion.",),
    prefixes: Iterable[str] = WRAPPER_PREFIXES,
) -> None:
    """Load ``weights`` into a freshly built ``extractor``.

    - ``None``: nothing (random initialisation).
    - A path to an existing file (``str`` or ``Path``): a checkpoint of the user's (a plain state dict or a
      Lightning checkpoint), loaded strictly into ``target`` (the extractor itself by default; the part of it
      that its checkpoints hold, e.g. the backbone) after stripping the wrapper ``prefixes`` (``model.``,
      ``extractor.``, ``module.`` by default; give fewer when the target's own keys start with one of them)
      and dropping the keys that start with one of ``ignore``
      (:func:`~oml_core.utils.checkpoints.load_checkpoint`).
    - Any other ``str``: a key of the pretrained zoo, downloaded once to the weights cache and converted
      (:func:`~oml_core.zoo.load_pretrained_state_dict`), then loaded with ``extractor.load_pretrained`` (a
      :class:`~oml_core.zoo.extractor.ZooExtractor`), or strictly into the whole ``extractor`` (any other).

    Raises:
        TypeError: ``weights`` is neither ``None``, a ``str`` nor a ``Path``.
        FileNotFoundError: ``weights`` is a ``Path``, or a string that looks like a path
            (:func:`looks_like_path`), and no such file exists.
        UnknownNameError: ``weights`` is a string that is neither a file nor a zoo key (close keys listed).
        PretrainedDownloadError: the zoo file is not cached and cannot be downloaded.
        CheckpointError: the checkpoint cannot be read or does not fit.
    """
    if weights is None:
        return
    if not isinstance(weights, (str, Path)):
        raise TypeError(
            f"weights must be None, a checkpoint path or a zoo key (str), got {type(weights).__name__}"
        )
    if isinstance(weights, Path) or Path(weights).is_file() or looks_like_path(weights):
        load_checkpoint(extractor if target is None else target, weights, prefixes=prefixes, ignore=ignore)
        return
    state_dict = load_pretrained_state_dict(weights)
    if isinstance(extractor, ZooExtractor):
        extractor.load_pretrained(state_dict, source=weights)
    else:
        load_state_dict_strict(extractor, state_dict, weights)


def build_for_weights(build: Callable[[], ModuleT], weights: str | Path | None) -> ModuleT:
    """``build()``, without its random initialisation when ``weights`` are to be loaded over it.

    With ``weights`` ``None`` the module is ``build()`` as it is (randomly initialised). Otherwise it is built
    on the meta device and materialised, uninitialised, on the current default device (``to_empty``): the
    caller then loads ``weights`` strictly (:func:`load_weights`) into the module, which sets every parameter
    and persistent buffer to the checkpoint's values, the values it would have after a random
    initialisation and the same load. A module with a non-persistent buffer (not in its state dict, so not
    loaded) is built by ``build()`` as it is. Nothing else differs but the time, and the global random
    generator, which the skipped initialisation no longer advances.

    Args:
        build: Builds the module (randomly initialised) under the current default device.
        weights: The ``weights`` argument of the extractor (see :func:`load_weights`).

    Returns:
        The module; its tensors hold no values yet when ``weights`` is not ``None``.
    """
    if weights is None:
        return build()
    with torch.device("meta"):
        module = build()
    persistent = module.state_dict(keep_vars=True)
    if any(name not in persistent for name, _ in module.named_buffers()):
        return build()
    return module.to_empty(device=torch.empty(0).device)


__all__ = ["CHECKPOINT_SUFFIXES", "build_for_weights", "load_weights", "looks_like_path"]
