"""Model interfaces: extractors (inputs to embeddings), pairwise models, freezable models."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from torch import Tensor, nn


class IExtractor(nn.Module, ABC):
    """Models have to inherit this interface to be comparable with the rest of the library.

    An extractor maps a batch of inputs to a batch of embeddings ``[batch_size, feat_dim]``.
    ``pretrained_models`` is a class-level mapping ``{key: checkpoint info}`` used by
    :meth:`from_pretrained`; an extractor with no zoo keeps it empty.
    """

    pretrained_models: dict[str, Any] = {}

    @property
    @abstractmethod
    def feat_dim(self) -> int:
        """The dimension of the embeddings; the only member every extractor must implement."""

    def extract(self, x: Tensor) -> Tensor:
        """Return the embeddings of ``x``; the same as ``forward`` unless a model needs otherwise."""
        return self.forward(x)

    @classmethod
    def from_pretrained(cls, weights: str, **kwargs: Any) -> IExtractor:
        """Build the extractor with the checkpoint ``weights``, a key of ``cls.pretrained_models``.

        Args:
            weights: A unique identifier (key) of a pretrained model stored in ``cls.pretrained_models``.
            kwargs: Constructor arguments overriding the ones stored with the checkpoint.

        Returns:
            An instance of ``cls``.

        Raises:
            KeyError: ``weights`` is not a key of ``cls.pretrained_models``; the known keys are listed.
        """
        if weights not in cls.pretrained_models:
            known = ", ".join(sorted(cls.pretrained_models)) or "(none)"
            raise KeyError(f"{cls.__name__} has no pretrained checkpoint {weights!r}; known: {known}")
        init_args = dict(cls.pretrained_models[weights].get("init_args", {}))
        init_args.update(kwargs)
        init_args["weights"] = weights
        return cls(**init_args)


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
