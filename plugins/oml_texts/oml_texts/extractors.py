"""Extractors of texts on Hugging Face transformers: OML's :class:`HFWrapper` (a model given, the first token's
hidden state) and the registered ``hf_text`` (:class:`HFTextExtractor`: a model read from a folder or the Hugging
Face cache, ``cls`` or ``mean`` pooling, optional normalisation, a zoo key checked by sha256).

Both take what the text datasets' items hold under ``input_tensors`` (batched): ``{"input_ids": [B, L],
"attention_mask": [B, L]}``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from oml_core.interfaces.export import BATCH_AXIS, ExportContext, ExportSignature, IExportable
from oml_core.interfaces.models import IExtractor
from oml_core.registry import ConfigError
from oml_core.zoo import get_pretrained
from oml_core.zoo.weights import load_weights, looks_like_path
from oml_texts.hub import load_model, load_tokenizer, resolve_model_folder
from oml_texts.tokens import DEFAULT_MAX_LENGTH
from oml_texts.zoo import check_model_folder

#: OML's type names of a Hugging Face model and of a tokenised batch (``oml.models.texts.huggingface``).
THFModel = nn.Module
TBatchEncoding = Mapping[str, Tensor]
#: The transformers classes whose outputs :class:`HFWrapper` is written for (OML's ``check_model_type``).
CHECKED_MODEL_TYPES = ("RobertaModel", "BertModel", "DistilBertModel")

#: The poolings of :class:`HFTextExtractor`.
POOLINGS = ("cls", "mean")
#: The keys of the extractor's own state dict that ``load_weights`` must not strip (its transformer is ``model``).
CHECKPOINT_PREFIXES = ("extractor.", "module.")
#: The inputs of an export's graph (the text datasets' items), their axis of tokens, and the export's folder of
#: the tokenizer.
TOKEN_INPUTS = ("input_ids", "attention_mask")
SEQUENCE_AXIS = "sequence"
TOKENIZER_FOLDER = "tokenizer"
#: The range of the lengths of an export's example and probe token sequences (short, and varied).
EXAMPLE_TOKENS = (6, 24)


def check_model_type(model: THFModel) -> None:
    """OML's check of a model for :class:`HFWrapper`: a ``UserWarning`` when ``model`` is none of
    :data:`CHECKED_MODEL_TYPES` of ``transformers`` (nothing when ``transformers`` is not installed).
    oml's :class:`HFWrapper` does not call it: any model whose output has ``last_hidden_state`` works."""
    try:
        import transformers
    except ImportError:
        return
    if not isinstance(model, tuple(getattr(transformers, name) for name in CHECKED_MODEL_TYPES)):
        warnings.warn(
            f"Unexpected model type: {type(model)}. Make sure your model is compatible with {HFWrapper.__name__}.",
            UserWarning,
            stacklevel=2,
        )


class HFWrapper(IExtractor):
    """OML's wrapper of a Hugging Face transformer: the embedding of a text is the last hidden state of its first
    token (``[CLS]``), ``model(input_ids, attention_mask=attention_mask)["last_hidden_state"][:, 0, :]``.

    Args:
        model: A transformer of ``transformers`` (``AutoModel.from_pretrained(...)``).
        feat_dim: The size of its hidden states (``model.config.hidden_size``).
    """

    def __init__(self, model: nn.Module, feat_dim: int) -> None:
        super().__init__()
        self.model = model
        self._feat_dim = feat_dim

    @property
    def described(self) -> str:
        """How messages name this extractor: its class (``hf_text`` adds its model's folder)."""
        return type(self).__name__

    def hidden_states(self, x: Mapping[str, Tensor]) -> Tensor:
        """``[B, L', feat_dim]``: the last hidden states of the tokens of ``x["input_ids"]`` up to the batch's last
        token (``L'``: the trailing columns that are padding in every text are left out; masked, they change no
        other token's state).

        Raises:
            ConfigError: a token id past the model's token embeddings (:func:`check_token_ids`).
        """
        check_token_ids(x["input_ids"], self.model, self.described)
        mask = x["attention_mask"]
        length = int(mask.any(dim=0).nonzero().max()) + 1 if mask.any() else mask.shape[1]
        return self.model(x["input_ids"][:, :length], attention_mask=mask[:, :length])["last_hidden_state"]

    def forward(self, x: Mapping[str, Tensor]) -> Tensor:
        """``[B, feat_dim]``: the first token's hidden state of each text."""
        return self.hidden_states(x)[:, 0, :]

    @property
    def feat_dim(self) -> int:
        return self._feat_dim


def token_embeddings(model: nn.Module) -> int | None:
    """The number of token embeddings of the transformer ``model`` (the ids it takes are below it); None for a
    model without ``get_input_embeddings`` or whose input embeddings are no ``nn.Embedding``."""
    get_input_embeddings = getattr(model, "get_input_embeddings", None)
    embeddings = get_input_embeddings() if callable(get_input_embeddings) else None
    return embeddings.num_embeddings if isinstance(embeddings, nn.Embedding) else None


def check_token_ids(input_ids: Tensor, model: nn.Module, owner: str) -> None:
    """Check that every id of ``input_ids`` has a token embedding in ``model`` (:func:`token_embeddings`), so that
    a tokenizer of another model is named rather than failing deep in the embedding layer.

    Raises:
        ConfigError: an id past the embeddings, naming ``owner`` (the extractor), the largest id and their number.
    """
    size = token_embeddings(model)
    if size is None or input_ids.numel() == 0:
        return
    largest = int(input_ids.max())
    if largest >= size:
        raise ConfigError(
            f"{owner}: the token id {largest} is past the {size} token embeddings of the model: the texts were "
            f"tokenised by another model's tokenizer; give the model's own"
        )


def mean_pooling(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """``sum_t m_t h_t / max(sum_t m_t, 1e-9)``: the mean of the hidden states ``hidden`` ``[B, L, D]`` over the
    tokens whose ``attention_mask`` ``[B, L]`` is 1 (sentence-transformers' mean pooling)."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)


class HFTextExtractor(HFWrapper, IExportable):
    """``hf_text``: a Hugging Face transformer read from a local folder or the Hugging Face cache (offline unless
    ``download``), its embedding the first token's hidden state (``pooling="cls"``, :class:`HFWrapper`'s) or the
    mean over the attention mask (``"mean"``, sentence-transformers'), L2-normalised when ``normalise_features``.

    Args:
        model: A local folder, or a model name of the Hugging Face hub; None: the zoo key's model (``weights``).
        pooling: ``cls`` or ``mean``; None: the zoo key's, else ``cls``.
        normalise_features: L2-normalise the embeddings (the name every extractor gives it); None: the zoo key's,
            else false.
        download: Download a model that is not in the Hugging Face cache.
        weights: None (the model's own weights); a checkpoint of ``oml train`` (a path), loaded over them; or a zoo
            key (``all_minilm_l6_v2``): the model's weights file is checked against the zoo's sha256 first.
        normalise: The former name of ``normalise_features``, accepted with a ``FutureWarning`` naming the new one
            (given with ``normalise_features``, it wins).

    Raises:
        ConfigError: no ``model`` and no zoo key; a bad ``pooling``; a folder that does not exist, a model not in
            the cache (all before any model is read); a zoo key of another extractor; a folder without a model's
            files, or one that transformers cannot read (:func:`~oml_texts.hub.load_model`).
        PretrainedChecksumError: the model's weights are not the zoo key's.
    """

    def __init__(
        self,
        model: str | None = None,
        pooling: str | None = None,
        normalise_features: bool | None = None,
        download: bool = False,
        weights: str | Path | None = None,
        normalise: bool | None = None,
    ) -> None:
        normalise_features = _renamed_normalise(normalise_features, normalise)
        zoo_key = _zoo_key(weights)
        defaults: Mapping[str, Any] = {}
        if zoo_key is not None:
            entry = get_pretrained(zoo_key)
            if entry.extractor != "hf_text":
                raise ConfigError(
                    f"hf_text: weights {zoo_key!r} is a zoo key of the extractor {entry.extractor!r}"
                )
            defaults = entry.init_args
        model = model if model is not None else defaults.get("model")
        pooling = pooling if pooling is not None else defaults.get("pooling", "cls")
        if model is None:
            raise ConfigError(
                "hf_text: model is null: give a folder or a Hugging Face model name (or a zoo key)"
            )
        if pooling not in POOLINGS:
            raise ConfigError(f"hf_text: pooling must be one of {list(POOLINGS)}, got {pooling!r}")
        folder = resolve_model_folder(model, download, "hf_text: model")
        if zoo_key is not None:
            check_model_folder(folder, zoo_key, entry)
        transformer = load_model(folder, "hf_text: model")
        super().__init__(transformer, int(transformer.config.hidden_size))
        #: The model's folder (its tokenizer is an export's).
        self.model_folder = folder
        self.pooling = pooling
        self.normalise_features = bool(
            normalise_features
            if normalise_features is not None
            else defaults.get("normalise_features", False)
        )
        if zoo_key is None:
            load_weights(self, weights, prefixes=CHECKPOINT_PREFIXES)

    @property
    def described(self) -> str:
        """``hf_text (model '<its folder>')``."""
        return f"hf_text (model {str(self.model_folder)!r})"

    def forward(self, x: Mapping[str, Tensor]) -> Tensor:
        """``[B, feat_dim]``: the pooled (and, with ``normalise_features``, L2-normalised) hidden states."""
        return self.pool(self.hidden_states(x), x["attention_mask"])

    def pool(self, hidden: Tensor, attention_mask: Tensor) -> Tensor:
        """``[B, feat_dim]``: the hidden states ``[B, L', D]`` of the first ``L'`` tokens of a batch pooled (the
        first token's, or their mean over ``attention_mask`` ``[B, L]``) and, with ``normalise_features``,
        L2-normalised."""
        if self.pooling == "cls":
            embeddings = hidden[:, 0, :]
        else:
            embeddings = mean_pooling(hidden, attention_mask[:, : hidden.shape[1]])
        return F.normalize(embeddings, p=2, dim=1) if self.normalise_features else embeddings

    def export_signature(self, context: ExportContext) -> ExportSignature:
        """Token ids and attention mask, int64 ``[batch, sequence]`` each (the text datasets' items), into
        :class:`TokensGraph` (the transformer, pooling and normalisation inside the graph); the preprocessing:
        the tokenizer, written to the export's ``tokenizer`` folder, and the texts dataset's ``max_length``."""
        config = self.model.config
        vocab_size = int(config.vocab_size)

        def example_inputs(batch_size: int, generator: torch.Generator) -> tuple[Tensor, ...]:
            low, high = EXAMPLE_TOKENS
            length = int(torch.randint(low, high + 1, (), generator=generator))
            input_ids = torch.randint(0, vocab_size, (batch_size, length), generator=generator)
            kept = torch.randint(2, length + 1, (batch_size,), generator=generator)
            attention_mask = (torch.arange(length)[None, :] < kept[:, None]).long()
            return input_ids * attention_mask, attention_mask

        def write_assets(folder: Path) -> None:
            load_tokenizer(str(self.model_folder)).save_pretrained(str(folder / TOKENIZER_FOLDER))

        axes = {0: BATCH_AXIS, 1: SEQUENCE_AXIS}
        preprocessing = {
            "modality": "texts",
            "input": "int64 [batch, sequence] input_ids and attention_mask of the tokenizer (padded, truncated)",
            "tokenizer": TOKENIZER_FOLDER,
            "max_length": context.dataset_args.get("max_length", DEFAULT_MAX_LENGTH),
            "pooling": self.pooling,
            "normalise_features": self.normalise_features,
        }
        return ExportSignature(
            module=TokensGraph(self),
            input_names=TOKEN_INPUTS,
            dynamic_axes=dict.fromkeys(TOKEN_INPUTS, axes),
            example_inputs=example_inputs,
            preprocessing=preprocessing,
            write_assets=write_assets,
            padding={SEQUENCE_AXIS: "attention_mask"},
        )


class TokensGraph(nn.Module):
    """What an export of :class:`HFTextExtractor` traces: ``forward(input_ids, attention_mask)``, every token of
    the batch through the transformer (no trailing padding columns are cut: masked, they change no other token's
    state, and the graph's sequence axis stays dynamic), then the extractor's :meth:`~HFTextExtractor.pool`."""

    def __init__(self, extractor: HFTextExtractor) -> None:
        super().__init__()
        self.extractor = extractor

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """``[B, feat_dim]`` of the tokens ``[B, L]`` and their mask ``[B, L]``."""
        hidden = self.extractor.model(input_ids, attention_mask=attention_mask)["last_hidden_state"]
        return self.extractor.pool(hidden, attention_mask)


def _renamed_normalise(normalise_features: bool | None, normalise: bool | None) -> bool | None:
    """``normalise_features``, or the value of its former name ``normalise`` with a ``FutureWarning`` naming the
    new one, so that a config of before the rename keeps working. Given both (an override
    ``extractor.args.normalise=false`` over the default config's ``normalise_features: true``), the former name,
    which the user wrote, wins, and the warning says so."""
    if normalise is None:
        return normalise_features
    also = (
        f" (normalise={normalise} is used, not normalise_features={normalise_features})"
        if normalise_features is not None and normalise_features != normalise
        else ""
    )
    warnings.warn(
        f"hf_text: the argument normalise is renamed normalise_features, as every extractor names it{also}; "
        "normalise will be removed",
        FutureWarning,
        stacklevel=3,
    )
    return normalise


def _zoo_key(weights: str | Path | None) -> str | None:
    """``weights`` when it is a zoo key (a string that is no file and does not look like a path), else None."""
    if not isinstance(weights, str) or Path(weights).is_file() or looks_like_path(weights):
        return None
    return weights


__all__ = [
    "CHECKED_MODEL_TYPES",
    "CHECKPOINT_PREFIXES",
    "EXAMPLE_TOKENS",
    "HFTextExtractor",
    "HFWrapper",
    "POOLINGS",
    "SEQUENCE_AXIS",
    "TOKENIZER_FOLDER",
    "TOKEN_INPUTS",
    "TokensGraph",
    "TBatchEncoding",
    "THFModel",
    "check_model_type",
    "check_token_ids",
    "mean_pooling",
    "token_embeddings",
]
