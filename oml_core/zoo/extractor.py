"""``ZooExtractor``: the extractor interface with the pretrained zoo's part of OML's API.

OML's ``IExtractor`` keeps a class's checkpoints in its own ``pretrained_models`` dictionary. Here the zoo keeps
them (plugins register them with ``oml_register_pretrained``), and the interface
(:class:`~oml_core.interfaces.models.IExtractor`) knows no zoo: an extractor with checkpoints in the zoo
subclasses :class:`ZooExtractor`, whose ``pretrained_models`` lists them and whose ``from_pretrained`` builds
the extractor with one, as OML's do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from oml_core.interfaces.models import IExtractor
from oml_core.registry.errors import UnknownNameError
from oml_core.utils.checkpoints import load_state_dict_strict
from oml_core.zoo.entry import PretrainedModel
from oml_core.zoo.store import (
    get_pretrained,
    load_pretrained_state_dict,
    pretrained_keys,
    registry_or_default,
)

if TYPE_CHECKING:
    from torch import Tensor

    from oml_core.registry import Registry


def registered_extractor_class(extractor_name: str, registry: Registry | None = None) -> type:
    """The class registered as the extractor ``extractor_name`` (in ``default_registry()`` when ``registry`` is
    ``None``).

    Raises:
        UnknownNameError: no plugin registers the extractor ``extractor_name``.
        TypeError: it is registered with a function, not a class.
    """
    factory = registry_or_default(registry).get("extractor", extractor_name).load()
    if not isinstance(factory, type):
        raise TypeError(
            f"the extractor {extractor_name!r} of the zoo is registered with a function, not a class"
        )
    return factory


class ZooCheckpoints:
    """The descriptor of ``cls.pretrained_models``: ``{key: PretrainedModel}`` of the zoo checkpoints (in the
    default registry, read when accessed) whose registered extractor is ``cls`` or a subclass of it, as OML's
    class attribute lists a class's checkpoints."""

    def __get__(self, instance: object, owner: type[ZooExtractor]) -> dict[str, PretrainedModel]:
        view = {}
        for key in pretrained_keys():
            entry = get_pretrained(key)
            try:
                factory = registered_extractor_class(entry.extractor)
            except UnknownNameError:  # a checkpoint of an extractor that is not installed: not this class's
                continue
            if issubclass(factory, owner):
                view[key] = entry
        return view


class ZooExtractor(IExtractor):
    """An extractor whose pretrained checkpoints are in the zoo (:mod:`oml_core.zoo`).

    It is an :class:`~oml_core.interfaces.models.IExtractor` (same contract: ``forward``, :attr:`feat_dim`,
    ``weights``) whose :attr:`pretrained_models` lists its checkpoints of the zoo and whose
    :meth:`from_pretrained` builds it with one. A ``weights`` zoo key given to the constructor, or to the
    registry, is loaded with :meth:`load_pretrained` (:func:`~oml_core.zoo.weights.load_weights`); override it
    when the zoo's checkpoints hold a part of the extractor only.
    """

    pretrained_models = ZooCheckpoints()  # OML's dictionary, read from the zoo

    def load_pretrained(self, state_dict: dict[str, Tensor], source: str) -> None:
        """Load the (converted) state dict of a zoo checkpoint; strictly into the whole extractor by default.

        An extractor whose zoo checkpoints hold only a part of it (the backbone of an extractor with a head)
        overrides this.

        Raises:
            CheckpointError: missing or unexpected keys, or shapes that differ; the message names ``source``.
        """
        load_state_dict_strict(self, state_dict, source)

    @classmethod
    def from_pretrained(cls, weights: str, registry: Registry | None = None, **kwargs: Any) -> IExtractor:
        """Build the extractor with the zoo checkpoint ``weights``, or with a local checkpoint file.

        A zoo key (``"vits16_dino"``): the checkpoint's constructor arguments (overridden by ``kwargs``) build
        the registered extractor of the checkpoint (``cls`` or a subclass: ``ZooExtractor.from_pretrained(key)``
        builds whichever extractor the key is for) with random weights; then the checkpoint, from the weights
        cache or downloaded there once (:func:`~oml_core.zoo.store.pretrained_checkpoint`), is converted and
        loaded with :meth:`load_pretrained`. A path to an existing file: ``cls(weights=path, **kwargs)``.

        Args:
            weights: A key of the zoo (``oml registry pretrained``), or a path to a checkpoint file.
            registry: Where the zoo is looked up (``default_registry()`` when ``None``).
            kwargs: Constructor arguments overriding the ones stored with the checkpoint.

        Raises:
            UnknownNameError: ``weights`` is neither a file nor a key of the zoo (close keys are suggested).
            TypeError: the key's checkpoint is for an extractor that is not ``cls`` or a subclass of it.
            PretrainedDownloadError: the file is not in the cache and cannot be downloaded.
        """
        if Path(weights).is_file():
            return cls(weights=weights, **kwargs)
        registry = registry_or_default(registry)
        entry = get_pretrained(weights, registry)
        factory = registered_extractor_class(entry.extractor, registry)
        if not issubclass(factory, cls):
            raise TypeError(
                f"the pretrained checkpoint {weights!r} is for the extractor {entry.extractor!r} "
                f"({factory.__name__}), not for {cls.__name__}"
            )
        # built by the registry: nested {name, args} specs of init_args (a backbone) come from it too
        args = {**entry.init_args, **kwargs, "weights": None}
        model = registry.build("extractor", {"name": entry.extractor, "args": args})
        model.load_pretrained(load_pretrained_state_dict(weights, registry), source=weights)
        return model


__all__ = ["ZooCheckpoints", "ZooExtractor", "registered_extractor_class"]
