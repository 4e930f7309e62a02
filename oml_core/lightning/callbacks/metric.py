"""``MetricValCallback``: feeds validation outputs to an ``IBasicMetric`` and logs its results."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_only

from oml_core.interfaces.loggers import IFigureLogger
from oml_core.interfaces.metrics import IBasicMetric, IMetricVisualisable


class MetricValCallback(pl.Callback):
    """This is a wrapper which allows to use ``IBasicMetric`` with PyTorch Lightning.

    On every validation epoch it calls ``metric.setup(num_samples)``, then
    ``metric.update(embeddings=outputs[embeddings_key], indices=outputs[index_key])`` for every batch of the
    loader ``loader_idx``, then ``metric.compute_metrics()``; the metrics are logged flat under OML's keys
    (``OVERALL/cmc/1``) and kept in :attr:`last_metrics`.

    Args:
        metric: Metric.
        log_images: Set True to log the metric's figures (worst queries) when it is ``IMetricVisualisable``.
        loader_idx: Index of the validation loader to compute the metric on.
        samples_in_getitem: Number of samples a dataset item holds (1 for images, 2 for pairs, 3 for triplets).
        embeddings_key: Key of the embeddings in the validation step's outputs.
        index_key: Key of the global dataset indices in the validation step's outputs.
    """

    def __init__(
        self,
        metric: IBasicMetric,
        log_images: bool = False,
        loader_idx: int = 0,
        samples_in_getitem: int = 1,
        embeddings_key: str = "embeddings",
        index_key: str = "idx",
    ):
        super().__init__()
        if log_images and not isinstance(metric, IMetricVisualisable):
            raise TypeError(
                f"log_images=True needs an IMetricVisualisable metric, got {type(metric).__name__}"
            )
        self.metric = metric
        self.log_images = log_images
        self.loader_idx = loader_idx
        self.samples_in_getitem = samples_in_getitem
        self.embeddings_key = embeddings_key
        self.index_key = index_key
        self.last_metrics: dict[str, float] = {}

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        loaders = trainer.val_dataloaders
        loader = loaders[self.loader_idx] if isinstance(loaders, list | tuple) else loaders
        self.metric.setup(num_samples=len(loader.dataset) * self.samples_in_getitem)

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if dataloader_idx == self.loader_idx:
            embeddings = outputs[self.embeddings_key].detach().float().cpu()
            self.metric.update(embeddings=embeddings, indices=outputs[self.index_key].cpu())

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        from oml_core.metrics import flatten_metrics

        metrics = flatten_metrics(self.metric.compute_metrics())
        self.last_metrics = metrics
        pl_module.log_dict(metrics, rank_zero_only=True, add_dataloader_idx=False)
        if self.log_images:
            self._log_figures(trainer)

    @rank_zero_only
    def _log_figures(self, trainer: pl.Trainer) -> None:
        figures, titles = self.metric.visualize()
        for figure, title in zip(figures, titles):
            for logger in trainer.loggers:
                if isinstance(logger, IFigureLogger):
                    logger.log_figure(figure, title, trainer.current_epoch)
