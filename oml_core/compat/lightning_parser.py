"""OML 4.0's ``oml.lightning.pipelines.parser``: the helpers with which OML's pipelines turn a config (a dict or an
omegaconf ``DictConfig``) into the arguments of Lightning's ``Trainer`` and of the training modules, for code
written for OML that builds its own training loop. They exist for OML's code only (oml's pipelines take the typed
config instead), so they live here; OML's path ``oml_core.lightning.pipelines.parser`` forwards to this module
(:data:`~oml_core.compat.modules.OML_MODULES`)::

    from oml_core.lightning.pipelines.parser import parse_engine_params_from_config, parse_scheduler_from_config

    trainer = pl.Trainer(max_epochs=2, **parse_engine_params_from_config({"accelerator": "cpu", "devices": 2}))
    module = ExtractorModule(..., **parse_scheduler_from_config(cfg, optimizer=optimizer))

Each one forwards to the code oml's own pipelines use for the same job (which take the typed config of
:mod:`oml_core.config`, not these helpers): the engine to :func:`~oml_core.engine.parse_engine_params`, the logger
to :func:`~oml_core.lightning.pipelines.shared.common.build_logger`, the scheduler to
:func:`~oml_core.lightning.pipelines.shared.training.scheduler_args`, the sampler to
:func:`~oml_core.config.components.build_component` with the dataset's labels and categories offered, the
checkpoint callback to :class:`~oml_core.lightning.callbacks.checkpoint.BestCheckpoint`. Components are built by
:func:`~oml_core.registry.default_registry` (every installed plugin's).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from pytorch_lightning.strategies import DDPStrategy

from oml_core.config.components import build_component, spec_of
from oml_core.config.schemas import SCHEDULING
from oml_core.const import CATEGORIES_COLUMN
from oml_core.engine import CHECKPOINTS_FOLDER, is_ddp_engine, parse_engine_params
from oml_core.interfaces.datasets import ILabeledDataset
from oml_core.interfaces.loggers import IPipelineLogger
from oml_core.interfaces.samplers import IBatchSampler
from oml_core.lightning.callbacks.checkpoint import BestCheckpoint
from oml_core.lightning.pipelines.shared.common import build_logger
from oml_core.lightning.pipelines.shared.training import scheduler_args
from oml_core.registry import default_registry, to_plain
from oml_core.registry.registry import CATEGORIES_ARGUMENT, needs_categories
from oml_core.utils.misc import dictconfig_to_dict

#: How the messages of the components built here name their caller: OML's path of these helpers.
_CALLER = "oml_core.lightning.pipelines.parser"


def parse_engine_params_from_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``pl.Trainer``'s ``devices``, ``strategy``, ``accelerator`` and ``use_distributed_sampler`` of a config's
    keys ``accelerator``, ``devices`` and ``find_unused_parameters``, as OML's function (the keys absent or null:
    the best choice for this machine).

    ``accelerator`` null: ``gpu`` when CUDA is available, else ``cpu``; ``devices`` null: every GPU (``gpu``) or
    1; on the CPU a list of devices is that many processes. More than one device runs Lightning's
    ``DDPStrategy(find_unused_parameters=...)``; one runs ``"auto"``. ``use_distributed_sampler`` is ``False``.

    The logic is :func:`~oml_core.engine.parse_engine_params`' (oml's pipelines'), with two differences that are
    OML's contract: the result has exactly OML's four keys (no ``num_nodes``: OML's function runs on one node
    and ignores the key), and its DDP strategy is Lightning's plain ``DDPStrategy``, the type OML's callers
    check the strategy against, where oml's pipelines use its subclass
    :class:`~oml_core.ddp.strategy.DDPStrategyClosedAtExit` (which destroys the process group at exit; a caller
    who wants that passes ``strategy=DDPStrategyClosedAtExit(...)`` to its ``Trainer`` itself).

    Args:
        cfg: A dict or ``DictConfig`` (converted to a dict first, as OML does).

    Raises:
        ConfigError: ``devices`` is neither null, a positive int nor a non-empty list (OML passes such a value
            on to Lightning, which refuses it later or, for an empty list, runs on one process).
    """
    cfg = dictconfig_to_dict(cfg)
    engine = parse_engine_params(
        cfg.get("accelerator"),
        cfg.get("devices"),
        find_unused_parameters=bool(cfg.get("find_unused_parameters", False)),
        ddp_strategy=DDPStrategy,
    )
    del engine["num_nodes"]
    return engine


def check_is_config_for_ddp(cfg: Mapping[str, Any]) -> bool:
    """Whether the engine parameters ``cfg`` (of :func:`parse_engine_params_from_config`) run more than one
    process: more than one device, or more than one node (:func:`~oml_core.engine.is_ddp_engine`).

    OML's function returns ``bool(cfg["strategy"])``, which is ``True`` for the one-process strategy ``"auto"``
    as well (Lightning 2 replaced the ``None`` that OML's check was written for); this one answers the question
    its name asks.
    """
    return is_ddp_engine(cfg)


def parse_logger_from_config(cfg: Mapping[str, Any]) -> IPipelineLogger:
    """The pipeline logger of the config key ``logger`` (a ``{name, args}`` spec), TensorBoard's when it is
    absent or null, writing into the working directory (OML's ``TensorBoardPipelineLogger(".")``), as oml's
    pipelines build it (:func:`~oml_core.lightning.pipelines.shared.common.build_logger`, the working directory
    in place of the run directory: OML's pipelines run in hydra's run directory).

    Raises:
        RegistryError: the logger is unknown or refuses its arguments.
        ConfigError: a relative ``save_dir`` that leads outside the working directory (OML writes there).
    """
    logger: IPipelineLogger = build_logger(default_registry(), cfg.get("logger"), Path.cwd())
    return logger


def parse_scheduler_from_config(cfg: Mapping[str, Any], optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """A training module's scheduler arguments from the config key ``scheduling``: ``scheduler`` (built by the
    registry on ``optimizer``), ``scheduler_interval``, ``scheduler_frequency`` and ``scheduler_monitor_metric``
    (its ``monitor_metric``); only ``{"scheduler": None}`` when the key is absent, null or empty. As oml's
    pipelines (:func:`~oml_core.lightning.pipelines.shared.training.scheduler_args`): ``scheduler_interval``
    defaults to ``step`` and ``scheduler_frequency`` to 1, where OML's requires both keys.

    Raises:
        ConfigError: ``scheduling`` has an unknown key, a bad value or no ``scheduler``; the scheduler refuses
            its arguments (one line naming the key).
        RegistryError: the scheduler is unknown.
    """
    scheduling = SCHEDULING.check(to_plain(cfg.get("scheduling")), "scheduling")
    return scheduler_args(scheduling, default_registry(), optimizer, _CALLER)


def parse_sampler_from_config(cfg: Mapping[str, Any], dataset: ILabeledDataset) -> IBatchSampler | None:
    """The batch sampler of the config key ``sampler`` (a ``{name, args}`` spec; null: ``None``) over
    ``dataset``: its factory gets the dataset's ``labels`` and ``label2category`` where it takes them and its
    ``args`` do not set them (OML drops the arguments a sampler does not take); no generator is passed, so a
    sampler draws from its own ``seed`` (as OML's).

    Raises:
        KeyError: the config has no key ``sampler`` (OML's contract: null says "no sampler").
        ValueError: a sampler that draws by category (:func:`needs_categories`) over a dataset without
            categories (no ``category`` in its ``extra_data``, or no ``extra_data``), checked before anything is
            built, as OML's.
        RegistryError, ConfigError: the sampler is unknown or refuses its arguments.
    """
    spec = cfg["sampler"]
    if spec is None:
        return None
    registry = default_registry()
    name = spec_of(spec)["name"]
    # OML's datasets all have extra_data; oml's interface does not require it (then there are no categories)
    if CATEGORIES_COLUMN not in getattr(dataset, "extra_data", {}) and needs_categories(registry, name):
        raise ValueError(
            f"sampler {name!r} draws its batches by category, but the dataset has no categories: its extra_data "
            f"has no {CATEGORIES_COLUMN!r} (the dataframe's {CATEGORIES_COLUMN!r} column)"
        )
    offers = {"labels": dataset.get_labels, CATEGORIES_ARGUMENT: dataset.get_label2category}
    sampler: IBatchSampler = build_component(registry, "sampler", spec, "sampler", _CALLER, offers=offers)
    return sampler


def parse_ckpt_callback_from_config(cfg: Mapping[str, Any]) -> BestCheckpoint:
    """The callback that keeps ``checkpoints/best.ckpt`` in the working directory: the checkpoint of the
    validation with the best ``metric_for_checkpointing`` by ``mode_for_checkpointing`` (``max`` by default).

    OML's is Lightning's ``ModelCheckpoint(dirpath=cwd/"checkpoints", monitor=..., mode=..., save_top_k=1,
    filename="best", verbose=True)``; this is oml's pipelines' :class:`~oml_core.lightning.callbacks.checkpoint.
    BestCheckpoint`, a ``ModelCheckpoint`` with the same fields (``dirpath``, ``monitor``, ``mode``,
    ``save_top_k=1``, ``best.ckpt``), which overwrites ``best.ckpt`` (never ``best-v1.ckpt`` beside an earlier
    file), never writes diverged weights, and prints nothing (the library is silent).
    """
    return BestCheckpoint(
        Path.cwd() / CHECKPOINTS_FOLDER,
        monitor=cfg["metric_for_checkpointing"],
        mode=cfg.get("mode_for_checkpointing", "max"),
    )


__all__ = [
    "parse_engine_params_from_config",
    "check_is_config_for_ddp",
    "parse_scheduler_from_config",
    "parse_sampler_from_config",
    "parse_ckpt_callback_from_config",
]
