"""Hook specifications of the ``oml`` plugin system.

Every hook is called with one argument, ``register``, a callback with the signature of
:class:`RegisterCallback`; a hook returns nothing. A plugin module implements any subset of them::

    from oml_core import hookimpl

    @hookimpl
    def oml_register_extractors(register):
        register("my_net", "my_pkg.models:MyNet", aliases=("mynet",), description="my extractor")

``factory`` is a callable (usually a class) or a lazy ``"package.module:attr"`` string, imported only
when the component is built or described, so that ``oml plugins`` and the registry stay fast and a
missing optional dependency only matters when its component is actually used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from oml_core.markers import hookspec


class RegisterCallback(Protocol):
    """The ``register`` callback passed to every ``oml_register_*`` hook but the config-dirs one."""

    def __call__(
        self,
        name: str,
        factory: Callable[..., Any] | str,
        *,
        aliases: Sequence[str] = (),
        description: str | None = None,
    ) -> None: ...


class RegisterConfigDirCallback(Protocol):
    """The ``register`` callback of :func:`oml_register_config_dirs`.

    ``search_path`` is a hydra search-path entry: ``"pkg://my_pkg.configs"`` or ``"file:///abs/dir"``.
    """

    def __call__(self, search_path: str) -> None: ...


@hookspec
def oml_register_extractors(register: RegisterCallback) -> None:
    """Register extractors: factories of :class:`~oml_core.interfaces.models.IExtractor`."""


@hookspec
def oml_register_pairwise_models(register: RegisterCallback) -> None:
    """Register pairwise models: factories of :class:`~oml_core.interfaces.models.IPairwiseModel`."""


@hookspec
def oml_register_losses(register: RegisterCallback) -> None:
    """Register losses: ``torch.nn.Module`` factories whose forward is ``forward(features, labels)``."""


@hookspec
def oml_register_miners(register: RegisterCallback) -> None:
    """Register miners: factories of :class:`~oml_core.interfaces.miners.ITripletsMiner`."""


@hookspec
def oml_register_pairs_miners(register: RegisterCallback) -> None:
    """Register pair miners: factories of :class:`~oml_core.interfaces.miners.IPairsMiner`."""


@hookspec
def oml_register_samplers(register: RegisterCallback) -> None:
    """Register batch samplers: factories of :class:`~oml_core.interfaces.samplers.IBatchSampler`.

    Pipelines call the factory with the runtime arguments ``labels`` (and ``label2category`` when the
    sampler's signature accepts it) besides the config's ``args``.
    """


@hookspec
def oml_register_optimizers(register: RegisterCallback) -> None:
    """Register optimizers: ``torch.optim.Optimizer`` factories called with runtime ``params``."""


@hookspec
def oml_register_schedulers(register: RegisterCallback) -> None:
    """Register learning-rate schedulers: factories called with the runtime ``optimizer``."""


@hookspec
def oml_register_transforms(register: RegisterCallback) -> None:
    """Register transforms: factories returning a callable applied to a decoded image."""


@hookspec
def oml_register_loggers(register: RegisterCallback) -> None:
    """Register pipeline loggers: factories of :class:`~oml_core.interfaces.loggers.IPipelineLogger`."""


@hookspec
def oml_register_postprocessors(register: RegisterCallback) -> None:
    """Register retrieval post-processors: factories of ``IRetrievalPostprocessor``."""


@hookspec
def oml_register_retrieval_metrics(register: RegisterCallback) -> None:
    """Register per-query retrieval metrics, computed by name by ``calc_retrieval_metrics``.

    The factory is the metric function itself: ``f(gt_tops, n_gts, top_k) -> list[FloatTensor]``
    (one tensor of per-query values for every ``k`` in ``top_k``), as :func:`calc_cmc`.
    """


@hookspec
def oml_register_knn_backends(register: RegisterCallback) -> None:
    """Register k-nearest-neighbour backends: factories of :class:`~oml_core.interfaces.knn.IKnnIndex`.

    A factory takes ``distance`` (``"l2"`` or ``"cosine"``) and its own parameters and returns an empty index;
    retrieval adds the gallery to it and searches it, with the exclusion contract of ``IKnnIndex`` (a query
    never retrieves an item of its own group). The core registers ``exact``; oml-faiss adds faiss's indexes.
    """


@hookspec
def oml_register_pretrained(register: RegisterCallback) -> None:
    """Register checkpoints of the pretrained zoo (the factory returns the checkpoint's metadata)."""


@hookspec
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """Register hydra search-path entries holding a plugin's default yaml configs."""
