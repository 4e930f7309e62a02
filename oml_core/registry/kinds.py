"""The kinds of things plugins register: their hook, their interface and how they are described.

A kind is named in the singular (``loss``); its hook is ``oml_register_<plural>`` (``oml_register_losses``).
The interface is given as a lazy ``"module:attr"`` string so that looking up a kind never imports torch
modules (or Lightning) that the caller does not need. :class:`ComponentOf` marks a factory's parameter that takes a
component of a kind by its registered name (the ``lambda`` scheduler's ``lr_lambda``).
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

#: The commands of ``oml`` itself (``oml_core.cli``; a test keeps the two equal): a plugin's command may not take
#: one of these names.
BUILTIN_COMMANDS = frozenset(
    {
        "train",
        "validate",
        "predict",
        "train-postprocessor",
        "validate-postprocessor",
        "plugins",
        "plugin",
        "registry",
        "mock-dataset",
        "check-dataframe",
        "index",
        "search",
        "export",
    }
)


@dataclass(frozen=True)
class Kind:
    """One kind of registrable component.

    Attributes:
        name: Singular name used in configs and the API (``registry.build("loss", ...)``).
        hook: Name of the pluggy hook that collects registrations of this kind.
        interface: ``"module:attr"`` of the class every built object must be an instance of,
            or ``None`` when any object is accepted (``callable`` is checked for ``callable=True`` kinds).
        callable: The built object (or the registered factory itself) must be callable.
        description: One line shown by ``oml registry``.
        core_args: Arguments that every component of the kind takes, whether or not its factory names them:
            ``{argument: "module:attr"}`` of a function ``apply(component, value)``. A factory that names the
            argument gets it like any other; for one that does not, the registry builds the component without it
            and then calls ``apply`` (an extractor's ``weights`` are loaded by
            :func:`oml_core.zoo.weights.load_weights`).
        reserved: Names no plugin may register for this kind (the ``oml`` commands of the core).
    """

    name: str
    hook: str
    interface: str | None
    callable: bool
    description: str
    core_args: MappingProxyType[str, str] = field(default_factory=lambda: MappingProxyType({}))
    reserved: frozenset[str] = frozenset()


_KINDS = (
    Kind(
        "extractor",
        "oml_register_extractors",
        "oml_core.interfaces.models:IExtractor",
        False,
        "models that map inputs to embeddings",
        MappingProxyType({"weights": "oml_core.zoo.weights:load_weights"}),
    ),
    Kind(
        "pairwise_model",
        "oml_register_pairwise_models",
        "oml_core.interfaces.models:IPairwiseModel",
        False,
        "models that score a pair of inputs",
    ),
    Kind("loss", "oml_register_losses", "torch.nn:Module", False, "criteria with forward(features, labels)"),
    Kind(
        "miner",
        "oml_register_miners",
        "oml_core.interfaces.miners:ITripletsMiner",
        False,
        "triplet miners",
    ),
    Kind(
        "pairs_miner",
        "oml_register_pairs_miners",
        "oml_core.interfaces.miners:IPairsMiner",
        False,
        "pair miners (the positive and negative pairs of a batch, for pairwise models)",
    ),
    Kind(
        "sampler",
        "oml_register_samplers",
        "oml_core.interfaces.samplers:IBatchSampler",
        False,
        "batch samplers",
    ),
    Kind("optimizer", "oml_register_optimizers", "torch.optim:Optimizer", False, "optimizers"),
    Kind("scheduler", "oml_register_schedulers", None, False, "learning-rate schedulers"),
    Kind(
        "lr_function",
        "oml_register_lr_functions",
        None,
        True,
        "learning-rate factors f(epoch) of the lambda scheduler",
    ),
    Kind("transforms", "oml_register_transforms", None, True, "image transforms (callables)"),
    Kind(
        "dataset",
        "oml_register_datasets",
        "oml_core.interfaces.datasets:IDatasetComponent",
        False,
        "kinds of data (modalities): the datasets of a pipeline from its data keys (config key dataset)",
    ),
    Kind(
        "logger",
        "oml_register_loggers",
        "oml_core.interfaces.loggers:IPipelineLogger",
        False,
        "pipeline loggers",
    ),
    Kind(
        "postprocessor",
        "oml_register_postprocessors",
        "oml_core.interfaces.retrieval:IRetrievalPostprocessor",
        False,
        "retrieval post-processors",
    ),
    Kind(
        "retrieval_metric",
        "oml_register_retrieval_metrics",
        None,
        True,
        "per-query retrieval metrics computed by name",
    ),
    Kind(
        "knn_backend",
        "oml_register_knn_backends",
        "oml_core.interfaces.knn:IKnnIndex",
        False,
        "k-nearest-neighbour indexes that retrieval searches through",
    ),
    Kind("pretrained", "oml_register_pretrained", None, False, "checkpoints of the pretrained zoo"),
    Kind(
        "command",
        "oml_register_commands",
        None,
        True,
        "oml subcommands (oml NAME ...): factory(parser) adds the arguments and returns handler(args)",
        reserved=BUILTIN_COMMANDS,
    ),
    Kind(
        "callback",
        "oml_register_callbacks",
        "pytorch_lightning:Callback",
        False,
        "Lightning callbacks of the training runs (config key callbacks)",
    ),
)

#: All kinds by name (read-only).
KINDS: MappingProxyType[str, Kind] = MappingProxyType({k.name: k for k in _KINDS})

#: Argument names that refer to a kind other than by its own name (``criterion:`` holds a loss).
ARGUMENT_ALIASES: MappingProxyType[str, str] = MappingProxyType({"criterion": "loss", "model": "extractor"})


@dataclass(frozen=True)
class ComponentOf:
    """The metadata of an ``Annotated`` parameter that takes a component of the kind ``kind`` (the registry's
    business, not the factory's).

    From a config such a parameter takes the component's registered name (``plugin:name`` included) or its
    ``{name, args}`` spec; the registry builds it, and gives the factory the built object. In code it takes the
    object itself. Nothing else: a ``"module:attr"`` string is looked up as a name, never imported. Example, the
    ``lambda`` scheduler's learning-rate function::

        def lambda_lr(optimizer, lr_lambda: Annotated[Callable[[int], float], ComponentOf("lr_function")]): ...

        lr_lambda: cosine                                              # a config: a registered name
        lr_lambda: {name: linear_warmup, args: {warmup_epochs: 3}}     # or its spec
    """

    kind: str


def component_of(annotation: Any) -> str | None:
    """The kind of :class:`ComponentOf` in ``annotation`` (``Annotated[X, ComponentOf(kind)]``, alone or in a
    ``Union``/``Optional``), else None."""
    if typing.get_origin(annotation) is typing.Annotated:
        return next((m.kind for m in annotation.__metadata__ if isinstance(m, ComponentOf)), None)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next(filter(None, map(component_of, typing.get_args(annotation))), None)
    return None


def get_kind(name: str) -> Kind:
    """Return the kind called ``name`` or raise ``KeyError`` listing the known kinds."""
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"Unknown kind {name!r}; the kinds are: {', '.join(KINDS)}") from None
