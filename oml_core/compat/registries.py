"""OML's registry modules (``oml.registry.models``, ``oml.registry.losses``, ...) as views of oml's registry.

OML keeps one module-level dict per kind (``EXTRACTORS_REGISTRY = {"vit": ViTExtractor, ...}``) and a pair of
functions per kind (``get_extractor(model_name, **kwargs)``, ``get_extractor_by_cfg(cfg, **kwargs)``). oml has no
module-level registries: components come from plugins through :class:`~oml_core.registry.Registry`. This
module gives OML's names over the registry of :func:`~oml_core.registry.default_registry`, so that code
written for OML runs with ``oml`` -> ``oml_core``::

    from oml_core.registry.models import EXTRACTORS_REGISTRY
    from oml_core.registry.transforms import TRANSFORMS_REGISTRY

    TRANSFORMS_REGISTRY["custom_augmentations"] = get_custom_augs    # registers in default_registry()
    EXTRACTORS_REGISTRY["custom_extractor"] = CustomExtractor
    extractor_training_pipeline(cfg)                                   # cfg.extractor.name: custom_extractor

A view (:class:`KindRegistryView`) holds no components of its own: reading looks the name up in the registry,
iterating lists the registry's names, and assigning registers the factory through a plugin added in code
(``add_plugin``), checked like any other plugin's, so the interface check and the duplicate-name rule apply.
``oml_core.registry.models``, ``oml_core.registry.losses`` and the other OML registry module paths are this
module (see :mod:`oml_core.compat.modules`).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any, TextIO

from oml_core.markers import hookimpl
from oml_core.registry import OML_REGISTRY_NAMES
from oml_core.registry.errors import UnknownNameError
from oml_core.registry.kinds import get_kind
from oml_core.registry.registry import Registry, default_registry, needs_categories, to_plain
from oml_core.registry.specs import is_spec
from oml_core.utils.logs import get_logger
from oml_core.zoo.store import (
    get_transforms_for_pretrained as get_transforms_for_pretrained,  # OML exports it here
)

logger = get_logger(__name__)


class KindRegistryView(MutableMapping[str, Any]):
    """OML's ``<KIND>S_REGISTRY`` dict over one kind of a :class:`Registry` (``default_registry()`` if none).

    - ``view[name]`` is the component's factory (a lazy ``"module:attr"`` factory is imported); an unknown name
      raises a ``KeyError`` with the registry's message (close matches, known names), so ``view.get(name)`` is
      ``None`` for it, as on a dict.
    - ``view[name] = factory`` registers ``factory`` (a callable or a ``"module:attr"`` string) under ``name``
      through a plugin added in code and named ``user-<kind>-<name>``. The factory is checked at once (a class
      must implement the kind's interface). Assigning the same name again replaces the earlier assignment;
      assigning a name that an installed plugin registers makes the name ambiguous, as with any two plugins
      (``plugin:name`` chooses).
    - ``del view[name]`` is refused: a plugin's registrations cannot be taken back one by one.

    With ``where``, the view holds only the components of the kind for which ``where(registry, name)`` is true
    (OML's ``SAMPLERS_CATEGORIES_BASED``, ``TRANSFORMS_ALBU``): reading another name raises ``KeyError``; an
    assignment registers as above, and the new component is in the view when ``where`` says so.
    """

    def __init__(
        self,
        kind: str,
        registry: Registry | None = None,
        where: Callable[[Registry, str], bool] | None = None,
    ) -> None:
        self.kind = get_kind(kind).name
        self._registry = registry
        self._where = where

    def _holds(self, registry: Registry, name: str) -> bool:
        return self._where is None or self._where(registry, name)

    @property
    def registry(self) -> Registry:
        """The registry this view reads and registers into."""
        return self._registry if self._registry is not None else default_registry()

    def __getitem__(self, name: str) -> Any:
        registry = self.registry
        try:
            entry = registry.get(self.kind, name)
        except UnknownNameError as e:  # a dict's KeyError, so that get(), pop() and `in` work as on a dict
            raise KeyError(str(e)) from e
        if not self._holds(registry, entry.name):
            raise KeyError(f"{self.kind} {name!r} is not in this view (its names: {list(self)})")
        return entry.load()

    def __setitem__(self, name: str, factory: Callable[..., Any] | str) -> None:
        hook = get_kind(self.kind).hook

        def register_one(register: Callable[..., None]) -> None:
            register(name, factory)

        plugin = type(f"register_{self.kind}_{name}", (), {hook: staticmethod(hookimpl(register_one))})
        plugin_name = f"user-{self.kind}-{name}"
        # checked on its own first, strictly: a bad name or a class that is not of the kind's interface raises
        # here, at the assignment, instead of being skipped with a warning when the registry is next read
        Registry([(plugin_name, plugin)], load_entrypoints=False, builtins=False, strict=True).entries(
            self.kind
        )
        registry = self.registry
        if any(record.info.name == plugin_name for record in registry.plugins()):
            registry.remove_plugin(plugin_name)  # assigning the same name again replaces, as in a dict
        registry.add_plugin(plugin, name=plugin_name)

    def __delitem__(self, name: str) -> None:
        raise TypeError(f"{self.kind} {name!r}: a registered component cannot be removed from the registry")

    def __contains__(self, name: object) -> bool:
        registry = self.registry
        return isinstance(name, str) and any(
            name in (e.name, *e.aliases, e.qualified_name) and self._holds(registry, e.name)
            for e in registry.entries(self.kind)
        )

    def __iter__(self) -> Iterator[str]:
        registry = self.registry
        return iter([name for name in registry.names(self.kind) if self._holds(registry, name)])

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind!r}, names={list(self)})"


#: The kinds whose OML builder names its first parameter ``model_name`` (``get_extractor``, ``get_pairwise_model``).
MODEL_KINDS = ("extractor", "pairwise_model")


def is_albumentations_transforms(registry: Registry, name: str) -> bool:
    """Whether the transforms ``name`` are built with albumentations, by OML's naming rule: ``albu`` is one of the
    ``_``-separated words of the name (``norm_albu``, ``norm_resize_albu_clip``); the others are torchvision's.
    ``registry`` is unused (the rule reads the name only)."""
    return "albu" in name.split("_")


def is_torchvision_transforms(registry: Registry, name: str) -> bool:
    """The transforms that :func:`is_albumentations_transforms` does not count: torchvision's (OML's
    ``TRANSFORMS_TORCH``)."""
    return not is_albumentations_transforms(registry, name)


def _builders(
    kind: str, oml_name: str, drop_unused: bool = False
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """OML's ``get_<oml_name>(name, **kwargs)`` and ``get_<oml_name>_by_cfg(cfg, **kwargs)`` for one kind, under
    those function names (``__name__``, as OML's functions: a loss's are ``get_criterion``...); the models'
    ``get_extractor`` and ``get_pairwise_model`` name their first parameter ``model_name``, as OML's.

    As OML's: a ``kwargs`` value that is a ``{name, args}`` spec (a loss's ``miner``, a siamese model's
    ``extractor``, a re-ranker's ``pairwise_model``) is built as the component its argument takes; with
    ``drop_unused`` (OML's samplers and losses), the other ``kwargs`` that the factory does not accept are
    dropped (OML's ``remove_unused_kwargs``), else they raise as any unknown argument does.
    """

    def build(spec: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        args = dict(spec.get("args") or {})
        nested = {key: value for key, value in kwargs.items() if is_spec(value)}
        runtime = {key: value for key, value in kwargs.items() if key not in nested}
        cfg = {"name": spec["name"], "args": {**args, **nested}}
        if not drop_unused:
            return default_registry().build(kind, cfg, **runtime)
        offers = {key: (lambda value=value: value) for key, value in runtime.items()}
        return default_registry().build(kind, cfg, offers=offers)

    def get_component(name: str, **kwargs: Any) -> Any:
        return build({"name": name}, kwargs)

    def get_model(model_name: str, **kwargs: Any) -> Any:
        return build({"name": model_name}, kwargs)

    get = get_model if kind in MODEL_KINDS else get_component

    def get_by_cfg(cfg: Any, **kwargs: Any) -> Any:
        spec = to_plain(cfg)
        return build(spec if isinstance(spec, dict) else {"name": spec}, kwargs)

    dropped = " (those it does not take are dropped, as OML's)" if drop_unused else ""
    get.__doc__ = (
        f"Build the {kind} of that name of ``default_registry()`` with ``kwargs`` as its arguments{dropped}; a "
        f"``{{name, args}}`` argument is built as a component (OML's name)."
    )
    get_by_cfg.__doc__ = (
        f"Build a {kind} from its ``{{name, args}}`` config; ``kwargs`` are runtime arguments{dropped} "
        "(OML's name)."
    )
    for function, function_name in ((get, f"get_{oml_name}"), (get_by_cfg, f"get_{oml_name}_by_cfg")):
        function.__name__ = function.__qualname__ = function_name
    return get, get_by_cfg


EXTRACTORS_REGISTRY = KindRegistryView("extractor")
PAIRWISE_MODELS_REGISTRY = KindRegistryView("pairwise_model")
LOSSES_REGISTRY = KindRegistryView("loss")
MINERS_REGISTRY = KindRegistryView("miner")
SAMPLERS_REGISTRY = KindRegistryView("sampler")
OPTIMIZERS_REGISTRY = KindRegistryView("optimizer")
SCHEDULERS_REGISTRY = KindRegistryView("scheduler")
TRANSFORMS_REGISTRY = KindRegistryView("transforms")
TRANSFORMS_ALBU = KindRegistryView("transforms", where=is_albumentations_transforms)
TRANSFORMS_TORCH = KindRegistryView("transforms", where=is_torchvision_transforms)
SAMPLERS_CATEGORIES_BASED = KindRegistryView("sampler", where=needs_categories)
LOGGERS_REGISTRY = KindRegistryView("logger")
POSTPROCESSORS_REGISTRY = KindRegistryView("postprocessor")

get_extractor, get_extractor_by_cfg = _builders("extractor", "extractor")
get_pairwise_model, get_pairwise_model_by_cfg = _builders("pairwise_model", "pairwise_model")
get_criterion, get_criterion_by_cfg = _builders("loss", "criterion", drop_unused=True)
get_miner, get_miner_by_cfg = _builders("miner", "miner")
get_sampler, get_sampler_by_cfg = _builders("sampler", "sampler", drop_unused=True)
get_optimizer, get_optimizer_by_cfg = _builders("optimizer", "optimizer")
get_scheduler, get_scheduler_by_cfg = _builders("scheduler", "scheduler")
get_transforms, get_transforms_by_cfg = _builders("transforms", "transforms")
get_logger, get_logger_by_cfg = _builders("logger", "logger")
get_postprocessor, get_postprocessor_by_cfg = _builders("postprocessor", "postprocessor")

#: The sections of :func:`show_registry` and their kinds, in OML's order.
SHOWN_KINDS = (
    ("Losses", "loss"),
    ("Miners", "miner"),
    ("Models", "extractor"),
    ("Optimizers", "optimizer"),
    ("Samplers", "sampler"),
    ("Schedulers", "scheduler"),
    ("Augmentations", "transforms"),
)


def registry_listing(registry: Registry | None = None) -> str:
    """The text of :func:`show_registry`: a section per OML kind (:data:`SHOWN_KINDS`), one
    ``name: factory(signature)`` line per component, a blank line after each section."""
    registry = registry if registry is not None else default_registry()
    lines = []
    for title, kind in SHOWN_KINDS:
        lines.append(f"{title}: ")
        for name in registry.names(kind):
            described = registry.describe(kind, name)
            factory = described["factory"].rpartition(":")[2]
            lines.append(f"{name}: {factory}{described['signature']}")
        lines.append("")
    return "\n".join(lines) + "\n"


def show_registry(registry: Registry | None = None, file: TextIO | None = None) -> None:
    """Write the components of OML's kinds (losses, miners, models, optimizers, samplers, schedulers,
    augmentations) to ``file`` (``None``: standard output), one ``name: factory(signature)`` line each
    (:func:`registry_listing`): OML's ``oml.registry.show_registry``, whose job is to print; ``oml registry`` is the
    command-line form. A component that cannot be imported (its plugin's extra is missing) is listed with the
    reason instead of its signature.

    Args:
        registry: The registry to list (``None``: :func:`~oml_core.registry.default_registry`).
        file: Where to write (``None``: ``sys.stdout``).
    """
    (file if file is not None else sys.stdout).write(registry_listing(registry))


def raise_if_needed(extractor_cfg: Mapping[str, Any], kwargs: Mapping[str, Any], model_name: str) -> None:
    """OML's check of a model wrapping an inner extractor (``extractor_with_mlp``, the siamese models), from its
    inner extractor's config ``extractor_cfg`` and its own arguments ``kwargs`` (``oml.registry.models``).

    Raises:
        ValueError: both give ``weights``: one of them would be overwritten.

    Warns:
        UserWarning: the inner extractor's ``weights`` is ``None`` and the model's are given: they may overwrite
            the inner extractor's initialisation.
    """
    if extractor_cfg.get("weights") and kwargs.get("weights"):
        raise ValueError(
            f"{model_name}: weights are given both to it ({kwargs['weights']!r}) and to its inner extractor "
            f"({extractor_cfg['weights']!r}); give only one"
        )
    if "weights" in extractor_cfg and extractor_cfg["weights"] is None and kwargs.get("weights"):
        warnings.warn(
            f"{model_name}: its weights {kwargs['weights']!r} may overwrite the inner extractor's weights",
            UserWarning,
            stacklevel=2,
        )


def save_transforms_as_files(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Save the albumentations transforms of a pipeline config as albumentations yaml files (OML's
    ``oml.registry.transforms.save_transforms_as_files``, which the pipelines use to log them).

    Every top-level key of ``cfg`` whose name holds ``transforms`` and whose value is a ``{name, args}`` spec is
    built by :func:`~oml_core.registry.default_registry`; an ``albumentations.Compose`` is written with
    ``albumentations.save`` to ``.hydra/<key>.yaml`` when the working directory has a ``.hydra`` folder, else to
    ``<key>.yaml`` there. Other transforms (torchvision's have no serialisation) are skipped, with a log line.
    Unlike OML's, a spec that does not build raises (OML prints a line and goes on).

    Returns:
        ``(key, path of the file)`` for each file written, in the order of ``cfg``.

    Raises:
        RegistryError, ConfigError: a transforms spec names an unknown component or has bad arguments.
    """
    saved = []
    for key, spec in to_plain(cfg).items():
        if "transforms" not in key or not is_spec(spec):
            continue
        transforms = default_registry().build("transforms", spec)
        # a Compose of albumentations was built by albumentations: the library is imported then, not otherwise
        albumentations = sys.modules.get("albumentations")
        if albumentations is None or not isinstance(transforms, albumentations.Compose):
            logger.info(
                "%s: %s has no file serialisation (not albumentations); not saved", key, type(transforms)
            )
            continue
        folder = Path(".hydra")
        path = str(folder / f"{key}.yaml") if folder.is_dir() else f"{key}.yaml"
        albumentations.save(transforms, path, data_format="yaml")
        saved.append((key, path))
    return saved


__all__ = [
    *OML_REGISTRY_NAMES,
    "KindRegistryView",
    "MODEL_KINDS",
    "SAMPLERS_CATEGORIES_BASED",
    "SHOWN_KINDS",
    "TRANSFORMS_ALBU",
    "TRANSFORMS_TORCH",
    "is_albumentations_transforms",
    "is_torchvision_transforms",
    "raise_if_needed",
    "registry_listing",
    "save_transforms_as_files",
    "get_criterion",
    "get_criterion_by_cfg",
    "get_extractor",
    "get_extractor_by_cfg",
    "get_logger",
    "get_logger_by_cfg",
    "get_miner",
    "get_miner_by_cfg",
    "get_optimizer",
    "get_optimizer_by_cfg",
    "get_pairwise_model",
    "get_pairwise_model_by_cfg",
    "get_postprocessor",
    "get_postprocessor_by_cfg",
    "get_sampler",
    "get_sampler_by_cfg",
    "get_scheduler",
    "get_scheduler_by_cfg",
    "get_transforms",
    "get_transforms_by_cfg",
]
