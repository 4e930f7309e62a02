"""Pieces shared by the inference pipelines (validation, post-processor validation and prediction): their
Trainer arguments (and the checks of their engine), and the extraction of embeddings in dataset order, on one
process or gathered from DDP's: all at once, or batch by batch to a consumer (:class:`EmbeddingsStream`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Any, cast

import pytorch_lightning as pl

from oml_core.engine import (
    check_one_device,
    merge_trainer_args,
    parse_engine_params,
)
from oml_core.lightning.pipelines.shared.preflight import check_engine
from oml_core.lightning.progress import PROGRESS_BAR_ARG, progress_bar_enabled

if TYPE_CHECKING:
    from torch import Tensor
    from torch.utils.data import DataLoader

    from oml_core.config.schemas import PipelineConfig

#: Trainer arguments set by other config keys, so ``lightning_trainer_extra_args`` may not set them.
TRAINER_ARGS_SET_BY_KEYS = {
    "accelerator": "the config key 'accelerator'",
    "devices": "the config key 'devices'",
    "num_nodes": "the config key 'num_nodes'",
    "strategy": "the config keys 'devices' and 'num_nodes'",
    "use_distributed_sampler": "the config key 'devices'",
    "precision": "the config key 'precision'",
    "logger": "the config key 'logger' (prediction logs nothing)",
    "callbacks": "its own callbacks",
    "default_root_dir": "the config keys 'logs_root' and 'logs_folder' (or 'save_dir')",
}
TRAINER_DEFAULTS = {"deterministic": True, "enable_model_summary": False, "enable_checkpointing": False}


def inference_trainer_args(config: PipelineConfig, multi_device: bool = False) -> dict[str, Any]:
    """The ``pl.Trainer`` arguments of an inference pipeline's typed config, its engine checked.

    They are those of the engine keys ``accelerator`` (null: gpu when CUDA is available, else cpu), ``devices``,
    ``num_nodes`` and ``precision`` (:func:`~oml_core.engine.parse_engine_params`),
    :data:`TRAINER_DEFAULTS`, and ``lightning_trainer_extra_args`` (any other ``pl.Trainer`` arguments). Their
    ``enable_progress_bar`` is always set: true or false as ``lightning_trainer_extra_args`` says, else (absent or
    null) a bar only on a terminal (:func:`~oml_core.lightning.progress.progress_bar_enabled`).

    With ``multi_device`` the engine may have several processes (DDP: the pipeline gathers their embeddings,
    see :func:`extract_embeddings`); without, the pipeline runs on one device.

    Returns:
        The Trainer arguments without logger, callbacks and root dir.

    Raises:
        ConfigError: more than one device without ``multi_device``, ``lightning_trainer_extra_args`` that
            ``pl.Trainer`` does not take or that a config key sets, or an engine, precision or Trainer argument
            this machine or Lightning refuses (:func:`~oml_core.lightning.pipelines.shared.preflight.check_engine`).
    """
    engine = parse_engine_params(config.accelerator, config.devices, num_nodes=config.num_nodes)
    if not multi_device:
        check_one_device(config.devices, engine, config.pipeline)
    trainer_args = merge_trainer_args(
        {**TRAINER_DEFAULTS, **engine, "precision": config.precision},
        config.lightning_trainer_extra_args,
        TRAINER_ARGS_SET_BY_KEYS,
    )
    trainer_args[PROGRESS_BAR_ARG] = progress_bar_enabled(trainer_args)
    check_engine(engine, config.precision, config.lightning_trainer_extra_args)
    return trainer_args


def extract_embeddings(trainer: pl.Trainer, extractor: Any, loader: DataLoader) -> Tensor:
    """The float embeddings that ``extractor`` gives to the items of ``loader`` (``trainer.predict`` of an
    ``ExtractorModule``), on the CPU, in dataset order (row ``i``: item ``i``) whatever the batches' order.

    Under DDP (``trainer.world_size > 1``) every process embeds its share of every batch
    (:class:`~oml_core.lightning.modules.extractor.ExtractorModuleDDP` patches ``loader``), the shares are
    gathered (:func:`~oml_core.ddp.utils.sync_dicts_ddp`) and every process returns all the embeddings; an item
    that two processes embedded (the padding of a batch that does not split evenly) is kept once. Every process
    of the group must call it.

    Raises:
        RuntimeError: an item of the dataset was embedded by no process.
    """
    from oml_core.ddp.utils import sync_dicts_ddp
    from oml_core.lightning.modules.extractor import ExtractorModule, ExtractorModuleDDP

    # one loader and return_predictions: predict returns the list of the batches' output dicts
    if trainer.world_size > 1:
        module: ExtractorModule = ExtractorModuleDDP(extractor=extractor, loaders_predict=loader)
        outputs = cast(list[dict[str, Any]], trainer.predict(module, return_predictions=True))
        shares = sync_dicts_ddp(_concatenated(outputs), trainer.world_size)
    else:
        module = ExtractorModule(extractor=extractor)
        outputs = cast(
            list[dict[str, Any]], trainer.predict(module, dataloaders=loader, return_predictions=True)
        )
        shares = _concatenated(outputs)
    # oml's datasets have a length (torch's Dataset does not declare one)
    return in_dataset_order(shares["idx"], shares["embeddings"], len(cast(Sized, loader.dataset)))


class EmbeddingsStream(pl.Callback):
    """Hands the embeddings of every predicted batch to ``consume``, in dataset order, as they are made: under
    DDP the processes' shares of a batch are gathered (:func:`~oml_core.ddp.utils.sync_dicts_ddp`) and its
    padding dropped, and only the process of global rank 0 consumes. Give it to the ``pl.Trainer`` and run
    :func:`stream_embeddings`; nothing of the batches is kept.

    Args:
        consume: Called with ``[b, dim]`` float CPU embeddings of the next ``b`` items of the dataset.

    Attributes:
        n_items: The items streamed so far.
    """

    def __init__(self, consume: Callable[[Tensor], None]) -> None:
        self.consume = consume
        self.n_items = 0

    def on_predict_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        """Gather the batch's embeddings (every process must call it), put them in order and consume them.

        Raises:
            RuntimeError: the batch is not the next items of the dataset (a loader that shuffles).
        """
        import torch

        from oml_core.ddp.utils import sync_dicts_ddp

        shares = sync_dicts_ddp(_concatenated([outputs]), trainer.world_size)
        positions = shares["idx"] - self.n_items
        n = len(torch.unique(positions))
        features = in_dataset_order(positions, shares["embeddings"], n)
        if trainer.is_global_zero:
            self.consume(features)
        self.n_items += n


def stream_embeddings(
    trainer: pl.Trainer, extractor: Any, loader: DataLoader, stream: EmbeddingsStream
) -> None:
    """Embed the items of ``loader`` (which must not shuffle) with ``extractor``, each batch handed to
    ``stream``'s consumer as it is made (``trainer.predict`` without keeping its predictions); ``stream`` must
    be one of ``trainer``'s callbacks. Under DDP every process embeds its share of every batch (as
    :func:`extract_embeddings`) and every process of the group must call it.

    Raises:
        RuntimeError: the items streamed are not those of the dataset, once each (or ``stream`` is not a callback
            of ``trainer``: none was streamed).
    """
    from oml_core.lightning.modules.extractor import ExtractorModule, ExtractorModuleDDP

    if trainer.world_size > 1:
        module: ExtractorModule = ExtractorModuleDDP(extractor=extractor, loaders_predict=loader)
        trainer.predict(module, return_predictions=False)
    else:
        trainer.predict(ExtractorModule(extractor=extractor), dataloaders=loader, return_predictions=False)
    n_items = len(cast(Sized, loader.dataset))
    if stream.n_items != n_items:
        raise RuntimeError(f"{stream.n_items} embeddings were streamed for a dataset of {n_items} items")


def _concatenated(outputs: Sequence[Mapping[str, Any]]) -> dict[str, Tensor]:
    """``{"idx": [n], "embeddings": [n, dim]}``: the dataset indices and float CPU features of the predicted
    batches."""
    import torch

    return {
        "idx": torch.cat([torch.as_tensor(b["idx"]).reshape(-1).cpu() for b in outputs]).long(),
        "embeddings": torch.cat([b["embeddings"].detach().float().cpu() for b in outputs]),
    }


def in_dataset_order(indices: Tensor, features: Tensor, n_items: int) -> Tensor:
    """``[n_items, dim]``: row ``i`` is the feature of dataset index ``i``; ``indices[j]`` is the index of
    ``features[j]``. An index given more than once (DDP's padding) keeps its first feature.

    Raises:
        RuntimeError: some index in ``0..n_items-1`` has no feature, or an index is out of that range.
    """
    import torch

    order = torch.sort(indices, stable=True).indices
    indices, features = indices[order], features[order]
    first = torch.ones(len(indices), dtype=torch.bool)
    first[1:] = indices[1:] != indices[:-1]
    indices, features = indices[first], features[first]
    if not torch.equal(indices, torch.arange(n_items)):
        missing = sorted(set(range(n_items)) - set(indices.tolist()))[:10]
        raise RuntimeError(
            f"embeddings were gathered for {len(indices)} distinct dataset indices of {n_items}; missing: "
            f"{missing}, out of range: {[i for i in indices.tolist() if not 0 <= i < n_items][:10]}"
        )
    return features


__all__ = [
    "TRAINER_ARGS_SET_BY_KEYS",
    "TRAINER_DEFAULTS",
    "EmbeddingsStream",
    "extract_embeddings",
    "in_dataset_order",
    "inference_trainer_args",
    "stream_embeddings",
]
