"""Model interfaces: extractors (inputs to embeddings), pairwise models, freezable models."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn


class IExtractor(nn.Module, ABC):
    """Models have to inherit this interface to be comparable with the rest of the library.

    An extractor maps a batch of inputs to a batch of embeddings ``[batch_size, feat_dim]``.

    The contract of an extractor that a plugin registers (``oml_register_extractors``):

    - implement :attr:`feat_dim` and ``forward(x)``: ``[B, ...]`` inputs to ``[B, feat_dim]`` embeddings;
    - ``weights`` is an argument of every extractor, whether its constructor names it or not: ``None`` (random
      initialisation), a checkpoint file (a state dict or a Lightning checkpoint of ``oml train``) or a key of the
      pretrained zoo. A constructor that does not name ``weights`` gets none; the registry builds the extractor,
      then loads them into the whole of it with :func:`oml_core.zoo.weights.load_weights` (the wrapper prefixes
      ``model.``, ``extractor.``, ``module.`` stripped, the ``criterion.`` keys of a training checkpoint
      dropped, the rest loaded strictly). A constructor that names ``weights`` loads them itself, usually with
      :func:`~oml_core.zoo.weights.load_weights` too (``target=`` a part of the model, ``ignore=`` more keys);
    - an extractor whose checkpoints a plugin registers in the pretrained zoo (``oml_register_pretrained``)
      subclasses :class:`oml_core.zoo.extractor.ZooExtractor`, this interface with the zoo's
      ``pretrained_models``, ``from_pretrained`` and ``load_pretrained``.

    This interface knows no zoo: as OML's, :attr:`pretrained_models` is a dictionary that a subclass fills with
    its own checkpoints, ``{key: {"init_args": {...}, ...}}``, and :meth:`from_pretrained` builds the subclass
    with one of them.
    """

    #: OML's checkpoints of a subclass: ``{key: {"init_args": {constructor arguments}, ...}}``, read by
    #: :meth:`from_pretrained`; the constructor gets the key as ``weights`` and loads it. Empty here.
    pretrained_models: Mapping[str, Any] = {}

    @property
    @abstractmethod
    def feat_dim(self) -> int:
        """The dimension of the embeddings; the only member every extractor must implement."""

    def extract(self, x: Tensor) -> Tensor:
        """Return the embeddings of ``x``; the same as ``forward`` unless a model needs otherwise."""
        return self.forward(x)

    @classmethod
    def from_pretrained(cls, weights: str, **kwargs: Any) -> IExtractor:
        """Build the extractor with its checkpoint ``weights``, as OML does:
        ``cls(weights=weights, **cls.pretrained_models[weights]["init_args"], **kwargs)``.

        Args:
            weights: A key of :attr:`pretrained_models`.
            kwargs: More constructor arguments (they must not repeat one of the checkpoint's ``init_args``).

        Raises:
            KeyError: ``weights`` is not a key of :attr:`pretrained_models` (the message lists its keys, and
                names where the zoo's checkpoints are built).
        """
        if weights not in cls.pretrained_models:
            raise KeyError(
                f"There is no pretrained model {weights}. The existing ones are {list(cls.pretrained_models)}. "
                f"(The checkpoints of the pretrained zoo, `oml registry pretrained`, are built by the zoo's "
                f"extractors: oml_core.zoo.ZooExtractor.from_pretrained.)"
            )
        return cls(weights=weights, **cls.pretrained_models[weights]["init_args"], **kwargs)


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
