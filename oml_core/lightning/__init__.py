"""PyTorch Lightning integration: modules, callbacks and config-driven pipelines.

OML 4.0's names are exported here, lazily (PEP 562: importing :mod:`oml_core.lightning.pipelines.shared`, the
config schema, imports no Lightning)::

    from oml_core.lightning import ExtractorModule, ExtractorModuleDDP, MetricValCallback
    from oml_core.lightning import PairwiseModule, PairwiseModuleDDP
    from oml_core.lightning import logging  # OML's loggers: logging.TensorBoardPipelineLogger(".")

``logging`` is :mod:`oml_core.lightning.pipelines.logging`, the loggers of the installed plugins under OML's names.
"""

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:  # the same names for static type checkers and IDEs, as explicit re-exports
    from oml_core.lightning.callbacks.metric import MetricValCallback as MetricValCallback
    from oml_core.lightning.callbacks.metric import MetricValCallbackDDP as MetricValCallbackDDP
    from oml_core.lightning.modules.ddp import ModuleDDP as ModuleDDP
    from oml_core.lightning.modules.extractor import ExtractorModule as ExtractorModule
    from oml_core.lightning.modules.extractor import ExtractorModuleDDP as ExtractorModuleDDP
    from oml_core.lightning.modules.pairwise_postprocessing import PairwiseModule as PairwiseModule
    from oml_core.lightning.modules.pairwise_postprocessing import PairwiseModuleDDP as PairwiseModuleDDP

_EXPORTS = {
    "ExtractorModule": "oml_core.lightning.modules.extractor",
    "ExtractorModuleDDP": "oml_core.lightning.modules.extractor",
    "MetricValCallback": "oml_core.lightning.callbacks.metric",
    "MetricValCallbackDDP": "oml_core.lightning.callbacks.metric",
    "ModuleDDP": "oml_core.lightning.modules.ddp",
    "PairwiseModule": "oml_core.lightning.modules.pairwise_postprocessing",
    "PairwiseModuleDDP": "oml_core.lightning.modules.pairwise_postprocessing",
}
#: OML's submodule alias: ``oml.lightning.logging`` is ``oml.lightning.pipelines.logging``.
_MODULE_ALIASES = {"logging": "oml_core.lightning.pipelines.logging"}

_class_getattr, _class_dir = lazy_exports(__name__, _EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _MODULE_ALIASES:
        module: ModuleType = importlib.import_module(_MODULE_ALIASES[name])
        setattr(sys.modules[__name__], name, module)
        return module
    return _class_getattr(name)


def __dir__() -> list[str]:
    return sorted({*_class_dir(), *_MODULE_ALIASES})


__all__ = sorted([*_EXPORTS, *_MODULE_ALIASES])
