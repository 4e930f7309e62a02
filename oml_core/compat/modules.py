"""OML's import paths that have no module of their own in the core: ``oml_core.losses.triplet`` and the like.

oml's import paths mirror OML's with ``oml_core`` for ``oml``. Most of OML's modules are real modules of the
core. The rest name things that live in plugins here (OML's ``oml.losses``, ``oml.miners``, ``oml.samplers``,
``oml.models``, ``oml.transforms``, ``oml.lightning.pipelines.logging``, ``oml.retrieval.postprocessors.pairwise``)
or in a core module of another name (``oml.utils.download_mock_dataset``, ``oml.registry.models``, ...). For
these paths this package provides *forwarding modules*, so that code written for OML runs with only the
``oml`` -> ``oml_core`` change::

    from oml_core.losses.triplet import TripletLossWithMiner      # the class of the oml-losses plugin
    from oml_core.models import ViTExtractor                       # the class of the oml-models plugin
    from oml_core.utils.download_mock_dataset import download_mock_dataset

Each path of :data:`OML_MODULES` is a file of the tree ``oml_core/compat/oml_paths/`` (``losses/triplet.py``,
written from the table by :mod:`oml_core.compat.tree`), found by Python's own import system: ``oml_core`` and the
core packages with such paths under them put the tree's folder on their ``__path__``, after their own
(:mod:`oml_core.utils.oml_path_folders`), so a real module always wins and nothing is installed on ``sys.meta_path``.
The file only sets the module's ``__getattr__`` (PEP 562) to :func:`forwarded_getattr`'s, so a forwarding module
imports nothing else when it is imported. Its attribute ``name`` is looked up, on first access, in this order:

1. the core modules listed for the path (``core``);
2. the components of the path's registry kinds (``kinds``) in :func:`~oml_core.registry.default_registry`, whose
   factory is called ``name`` (a lazy ``"module:attr"`` factory is matched on ``attr``, without importing);
3. the top-level exports of the packages of the plugins that register components of those kinds (every plugin
   package exports its public classes at its top level: ``from oml_losses import TripletLossWithMiner``).

The first of these steps that finds ``name`` gives it, and it is cached in the module. The core imports no
plugin by name: which packages are searched follows from the installed plugins. Two different objects of one
name within a step (two plugins exporting ``ResnetExtractor``) are an error naming both, never a silent choice.
A public name found nowhere raises :class:`OmlNameError` (an ``ImportError``, so that ``from ... import``
shows its message) naming the packages searched; a name starting with ``_`` raises ``AttributeError``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: The package whose submodules this module provides.
CORE_PACKAGE = "oml_core"


@dataclass(frozen=True)
class OmlModule:
    """Where the names of one of OML's modules come from.

    Attributes:
        core: Core modules searched first, in order.
        kinds: Registry kinds whose components, and whose plugins' packages, are searched next.
    """

    core: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()


def _same(paths: Iterable[str], source: OmlModule) -> dict[str, OmlModule]:
    return dict.fromkeys(paths, source)


_MODELS = OmlModule(kinds=("extractor", "pairwise_model"))
_LOSSES = OmlModule(kinds=("loss",))
_MINERS = OmlModule(kinds=("miner", "pairs_miner"))
_SAMPLERS = OmlModule(kinds=("sampler",))
_TRANSFORMS = OmlModule(kinds=("transforms",))
_OML_REGISTRIES = OmlModule(core=("oml_core.compat.registries",))

#: OML 4.0's module paths (relative to the package) provided as forwarding modules: each is a file of the tree
#: ``oml_paths/`` (:mod:`oml_core.compat.tree`; ``python -m tests.scripts.oml_paths`` writes them after a change here).
OML_MODULES: dict[str, OmlModule] = {
    **_same(
        (
            "models",
            "models.meta",
            "models.meta.projection",
            "models.meta.siamese",
            "models.resnet",
            "models.resnet.extractor",
            "models.resnet.pooling",
            "models.vit_clip",
            "models.vit_clip.extractor",
            "models.vit_dino",
            "models.vit_dino.extractor",
            "models.vit_unicom",
            "models.vit_unicom.extractor",
        ),
        _MODELS,
    ),
    **_same(("losses", "losses.arcface", "losses.surrogate_precision", "losses.triplet"), _LOSSES),
    **_same(
        (
            "miners",
            "miners.cross_batch",
            "miners.inbatch_all_tri",
            "miners.inbatch_hard_cluster",
            "miners.inbatch_hard_tri",
            "miners.inbatch_nhard_tri",
            "miners.miner_with_bank",
            "miners.pairs",
        ),
        _MINERS,
    ),
    **_same(
        ("samplers", "samplers.balance", "samplers.category_balance", "samplers.distinct_category_balance"),
        _SAMPLERS,
    ),
    **_same(("transforms", "transforms.images", "transforms.images.torchvision"), _TRANSFORMS),
    "lightning.pipelines.logging": OmlModule(core=("oml_core.interfaces.loggers",), kinds=("logger",)),
    "retrieval.postprocessors.algo": OmlModule(core=("oml_core.retrieval.postprocessors.thresholding",)),
    "retrieval.postprocessors.pairwise": OmlModule(kinds=("postprocessor",)),
    "utils.download_mock_dataset": OmlModule(core=("oml_core.datasets.mock",), kinds=("dataset",)),
    "utils.dataframe_format": OmlModule(core=("oml_core.datasets.dataframe_format",)),
    **_same(
        (
            "registry.loggers",
            "registry.losses",
            "registry.miners",
            "registry.models",
            "registry.optimizers",
            "registry.postprocessors",
            "registry.samplers",
            "registry.schedulers",
            "registry.transforms",
        ),
        _OML_REGISTRIES,
    ),
    "transforms.images.albumentations": _TRANSFORMS,
    "transforms.images.utils": _TRANSFORMS,
    **_same(("datasets.audios", "datasets.texts"), OmlModule(kinds=("dataset",))),
    "models.utils": OmlModule(core=("oml_core.utils.state_dicts",)),
    "inference.abstract": OmlModule(core=("oml_core.inference",)),
    "functional.knn": OmlModule(core=("oml_core.knn.batched",)),
    **_same(
        (
            "models.audio",
            "models.audio.ecapa_tdnn",
            "models.audio.ecapa_tdnn.extractor",
            "models.texts",
            "models.texts.huggingface",
        ),
        _MODELS,
    ),
    "utils.audios": OmlModule(kinds=("dataset",)),
    "lightning.pipelines.parser": OmlModule(core=("oml_core.compat.lightning_parser",)),
}


class OmlNameError(ImportError):
    """A public name that a forwarding module cannot find (or finds twice)."""


def _plugin_package(module: str | None) -> str | None:
    """The package of a plugin's module (``oml_losses.plugin`` -> ``oml_losses``); ``None`` for a top-level module."""
    if not module or "." not in module:
        return None
    return module.rpartition(".")[0]


def _one(found: Sequence[tuple[str, Any]], module: str, name: str) -> Any:
    distinct: list[tuple[str, Any]] = []
    for where, value in found:
        if all(value is not other for _, other in distinct):
            distinct.append((where, value))
    if len(distinct) > 1:
        raise OmlNameError(
            f"{module}.{name} is ambiguous: it is given by {', '.join(w for w, _ in distinct)}; "
            f"import it from one of these directly"
        )
    return distinct[0][1]


def find_forwarded(module: str, source: OmlModule, name: str) -> Any:
    """Look ``name`` up for the forwarding module ``module`` (see the module's docstring for the order).

    Raises:
        OmlNameError: ``name`` is found nowhere, or two different objects are found in one step.
    """
    found: list[tuple[str, Any]] = []
    for core_module in source.core:
        imported = importlib.import_module(core_module)
        if hasattr(imported, name):
            found.append((core_module, getattr(imported, name)))
    if found:
        return _one(found, module, name)
    if not source.kinds:
        raise OmlNameError(f"{module} has no {name!r} (looked in {', '.join(source.core)})")

    from oml_core.registry import default_registry

    registry = default_registry()
    entries = [entry for kind in source.kinds for entry in registry.entries(kind)]
    # a factory's attribute name from "module:qualname", so a lazy factory is matched without importing it
    matching = [e for e in entries if e.factory_path.rpartition(".")[2].rpartition(":")[2] == name]
    found = [(e.factory_path, e.load()) for e in matching]
    if found:
        return _one(found, module, name)
    packages = list(dict.fromkeys(p for e in entries if (p := _plugin_package(e.plugin.module)) is not None))
    for package in packages:
        imported = importlib.import_module(package)
        if hasattr(imported, name):
            found.append((package, getattr(imported, name)))
    if found:
        return _one(found, module, name)
    raise OmlNameError(
        f"{module} (OML's {module.replace(CORE_PACKAGE, 'oml', 1)}) has no {name!r}: no registered "
        f"{' or '.join(source.kinds)} component is called so and the packages of the plugins that provide them "
        f"({', '.join(packages) or 'none installed'}) do not export it. Run `oml plugins` to see what is installed."
    )


def forwarded_getattr(module: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` (PEP 562) of the forwarding module ``module`` (``oml_core.losses.triplet``, a
    path of :data:`OML_MODULES`): a public name is looked up by :func:`find_forwarded` and cached in the module.
    ``__all__`` is the core module's when the path is one core module under another name (``core`` one module,
    no ``kinds``: ``from oml_core.lightning.pipelines.parser import *``); any other name starting with ``_``
    raises ``AttributeError`` (so a forwarding module is no package: it has no ``__path__``).

    Raises:
        KeyError: ``module`` is not ``oml_core.<a path of OML_MODULES>``.
    """
    source = OML_MODULES[module.partition(".")[2]]
    one_module = source.core[0] if len(source.core) == 1 and not source.kinds else None

    def __getattr__(name: str) -> Any:
        if name == "__all__" and one_module is not None:
            value = list(importlib.import_module(one_module).__all__)
        elif name.startswith("_"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        else:
            value = find_forwarded(module, source, name)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__


__all__ = ["OML_MODULES", "OmlModule", "OmlNameError", "find_forwarded", "forwarded_getattr"]
