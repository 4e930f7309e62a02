"""``PretrainedModel``: what the zoo knows of one checkpoint (all its metadata, in one place)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Readers of images for :attr:`PretrainedModel.imread` (``"module:attr"``, imported when asked for).
IMREADERS: Mapping[str, str] = {"pil": "oml_core.utils.images:imread_pil"}


@dataclass(frozen=True)
class PretrainedModel:
    """A checkpoint of the pretrained zoo, registered by a plugin under its key (``vits16_dino``)::

        @hookimpl
        def oml_register_pretrained(register):
            register("vits16_dino", partial(PretrainedModel, extractor="vit", init_args={...}, url=..., ...))

    The factory builds the metadata only (no download, no torch import): a registry lists the zoo cheaply.

    Attributes:
        extractor: Registered name of the extractor the checkpoint is for (``"vit"``).
        init_args: Constructor arguments of that extractor for this checkpoint, ``weights`` excluded.
        url: Where the file is downloaded from.
        md5: The md5 hex digest of the file, or its first characters (at least 6, as OML's zoo keeps them),
            checked after a download (``None``: unknown, not checked).
        sha256: The same for the sha256 digest (what GitHub releases and torchvision's file names publish);
            both are checked when both are given.
        filename: Name of the file in the weights cache (:func:`~oml_core.zoo.store.weights_cache_dir`).
        transforms: ``{name, args}`` of a registered ``transforms`` factory: the images' preprocessing; ``None``
            for a model whose inputs need no transforms (audio: the dataset component's own processing).
        converter: ``"module:function"`` turning the state dict read from the file (its upstream format:
            the original DINO release, OpenAI's CLIP, ...) into the one the extractor's
            :meth:`~oml_core.interfaces.models.IExtractor.load_pretrained` expects; ``None`` when the file is
            already in that format.
        imread: Key of :data:`IMREADERS`: how images are read for this model.
        description: One line for ``oml registry pretrained``.
    """

    extractor: str
    init_args: Mapping[str, Any]
    url: str
    md5: str | None
    filename: str
    transforms: Mapping[str, Any] | None
    converter: str | None = None
    imread: str = "pil"
    description: str = ""
    sha256: str | None = None

    def __post_init__(self) -> None:
        if "weights" in self.init_args:
            raise ValueError(f"{self.filename}: init_args must not hold 'weights' (the zoo key gives them)")
        if self.imread not in IMREADERS:
            raise ValueError(
                f"{self.filename}: imread must be one of {sorted(IMREADERS)}, got {self.imread!r}"
            )
        for name, digest, length in (("md5", self.md5, 32), ("sha256", self.sha256, 64)):
            if digest is not None and not (
                6 <= len(digest) <= length and set(digest) <= set("0123456789abcdef")
            ):
                raise ValueError(
                    f"{self.filename}: {name} must be 6 to {length} lowercase hex digits (a digest or its start), "
                    f"got {digest!r}"
                )

    def load_converter(self) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """The :attr:`converter` function, imported (``None`` when there is none)."""
        if self.converter is None:
            return None
        from oml_core.utils.imports import resolve

        return resolve(self.converter)


__all__ = ["IMREADERS", "PretrainedModel"]
