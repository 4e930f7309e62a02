"""Model interfaces: extractors (inputs to embeddings), pairwise models, freezable models."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from torch import Tensor, nn


def _zoo_class(extractor_name: str, registry: Any) -> type:
    """The class registered as the extractor ``extractor_name`` (``default_registry()`` if ``registry`` is
    ``None``)."""
    from oml_core.zoo.store import registry_or_default

    factory = registry_or_default(registry).get("extractor", extractor_name).load()
    if not isinstance(factory, type):
        raise TypeError(
            f"the extractor {extractor_name!r} of the zoo is registered with a function, not a class"
        )
    return factory


class _ZooView:
    """``cls.pretrained_models``: ``{key: PretrainedModel}`` of the zoo checkpoints of the extractor class
    ``cls`` (as OML's attribute), read from the default registry when accessed."""

    def __get__(self, instance: Any, owner: type[IExtractor]) -> dict[str, Any]:
        from oml_core.registry import UnknownNameError
        from oml_core.zoo.store import get_pretrained, pretrained_keys

        view = {}
        for key in pretrained_keys():
            entry = get_pretrained(key)
            try:
                factory = _zoo_class(entry.extractor, None)
            except UnknownNameError:  # a checkpoint of an extractor that is not installed: not this class's
                continue
            if issubclass(factory, owner):
                view[key] = entry
        return view


class IExtractor(nn.Module, ABC):
    """Models have to inherit this interface to be comparable with the rest of the library.

    An extractor maps a batch of inputs to a batch of embeddings ``[batch_size, feat_dim]``. Its pretrained
    checkpoints live in the zoo (:mod:`oml_core.zoo`): ``cls.pretrained_models`` lists them,
    :meth:`from_pretrained` builds the extractor with one.

    The contract of an extractor that a plugin registers (``oml_register_extractors``):

    - implement :attr:`feat_dim` and ``forward(x)``: ``[B, ...]`` inputs to ``[B, feat_dim]`` embeddings;
    - ``weights`` is an argument of every extractor, whether its constructor names it or not: ``None`` (random
      initialisation), a checkpoint file (a state dict or a Lightning checkpoint of ``oml train``) or a key of the
      pretrained zoo. A constructor that does not name ``weights`` gets none; the registry builds the extractor,
      then loads them into the whole of it with :func:`oml_core.zoo.weights.load_weights` (the wrapper prefixes
      ``model.``, ``extractor.``, ``module.`` stripped, the ``criterion.`` keys of a training checkpoint
      dropped, the rest loaded strictly). A constructor that names ``weights`` loads them itself, usually with
      :func:`~oml_core.zoo.weights.load_weights` too (``target=`` a part of the model, ``ignore=`` more keys);
    - override :meth:`load_pretrained` when the zoo's checkpoints hold a part of the extractor only.
    """

    pretrained_models = _ZooView()

    @property
    @abstractmethod
    def feat_dim(self) -> int:
        """The dimension of the embeddings; the only member every extractor must implement."""

    def extract(self, x: Tensor) -> Tensor:
        """Return the embeddings of ``x``; the same as ``forward`` unless a model needs otherwise."""
        return self.forward(x)

    def load_pretrained(self, state_dict: dict[str, Tensor], source: str) -> None:
        """Load the (converted) state dict of a zoo checkpoint; strictly into the whole extractor by default.

        An extractor whose zoo checkpoints hold only a part of it (the backbone of an extractor with a head)
        overrides this.

        Raises:
            CheckpointError: missing or unexpected keys, or shapes that differ; the message names ``source``.
        """
        from oml_core.utils.checkpoints import load_state_dict_strict

        load_state_dict_strict(self, state_dict, source)

    @classmethod
    def from_pretrained(cls, weights: str, registry: Any = None, **kwargs: Any) -> IExtractor:
        """Build the extractor with the zoo checkpoint ``weights``, or with a local checkpoint file.

        A zoo key (``"vits16_dino"``): the checkpoint's constructor arguments (overridden by ``kwargs``) build
        the registered extractor of the checkpoint (``cls`` or a subclass: ``IExtractor.from_pretrained(key)``
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
        from pathlib import Path

        from oml_core.zoo.store import get_pretrained, load_pretrained_state_dict, registry_or_default

        if Path(weights).is_file():
            return cls(weights=weights, **kwargs)
        registry = registry_or_default(registry)
        entry = get_pretrained(weights, registry)
        factory = _zoo_class(entry.extractor, registry)
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


class IPairwiseModel(nn.Module, ABC):
    """A model of this type takes two inputs, for example, two embeddings or two images."""

    @abstractmethod
    def forward(self, x1: Any, x2: Any) -> Tensor:
        """Score the pairs ``(x1[i], x2[i])`` during training.

        Args:
            x1: The first input.
            x2: The second input.
        """

    @abstractmethod
    def predict(self, x1: Any, x2: Any) -> Tensor:
        """Score the pairs at inference or validation time.

        While ``forward`` is called during training, this method is called during inference or
        validation; it may apply an activation that was part of the loss during training.

        Args:
            x1: The first input.
            x2: The second input.
        """


class IFreezable(ABC):
    """Models which can freeze and unfreeze their parts."""

    @abstractmethod
    def freeze(self) -> None:
        """Function for freezing. You can use it to partially freeze a model."""

    @abstractmethod
    def unfreeze(self) -> None:
        """Function for unfreezing. You can use it to unfreeze a model."""
