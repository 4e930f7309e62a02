"""``MetricValCallback``: feed validation outputs to a metric, log its results; on one process and under DDP."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_only
from torch import Tensor

from oml_core.ddp.patching import check_loaders_is_patched
from oml_core.interfaces.loggers import IFigureLogger
from oml_core.interfaces.metrics import IBasicMetric, IMetricDDP, IMetricVisualisable


class MetricValCallback(pl.Callback):
    """This is a wrapper which allows to use ``IBasicMetric`` with PyTorch Lightning.

    For the validation loader ``loader_idx`` it calls ``metric.setup(num_samples=samples_in_getitem *
    len(dataset))`` before its first batch, ``metric.update(embeddings=outputs[embeddings_key],
    indices=outputs[index_key])`` after every batch, and ``metric.compute_metrics()`` after its last batch.
    The metrics are logged flat under OML's keys (``OVERALL/cmc/1``), with Lightning's ``/dataloader_idx_<n>``
    suffix when there are several validation loaders (bind one callback to each), and kept in
    :attr:`last_metrics` (without suffix).

    **DDP** (as OML 4.0's): every process updates the metric with its share of the validation batches; before
    computing, a metric with ``sync()`` (``IMetricDDP``, e.g. ``EmbeddingMetrics``) gathers the shares of all
    the processes (items repeated by padding count once), so every process computes and logs the same metrics
    over the whole dataset. The validation loaders must then be patched to DDP
    (:class:`~oml_core.lightning.modules.ddp.ModuleDDP`, e.g. ``ExtractorModuleDDP``, does it): a
    ``RuntimeError`` says so at the start of validation otherwise.

    Args:
        metric: Metric.
        log_images: Set True to log the metric's figures (worst queries) when it is ``IMetricVisualisable``.
        loader_idx: Index of the validation loader to compute the metric on.
        samples_in_getitem: Some of the datasets return several samples when calling ``__getitem__``: 1 for
            images, 2 for a dataset of pairs, 3 for a dataset of triplets.
        embeddings_key: Key of the embeddings in the validation step's outputs.
        index_key: Key of the global dataset indices in the validation step's outputs.
        figures_dir: With ``log_images``, also write the figures as PNG files to
            ``figures_dir/epoch_<n>/<title>.png`` (:func:`save_figures`).

    Raises:
        TypeError: ``log_images`` with a metric that cannot draw.
    """

    def __init__(
        self,
        metric: IBasicMetric,
        log_images: bool = False,
        loader_idx: int = 0,
        samples_in_getitem: int = 1,
        embeddings_key: str = "embeddings",
        index_key: str = "idx",
        figures_dir: Path | None = None,
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
        self.figures_dir = figures_dir
        self.last_metrics: dict[str, float] = {}

    def on_validation_batch_start(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if dataloader_idx == self.loader_idx and batch_idx == 0:
            loaders = trainer.val_dataloaders
            loader = loaders[self.loader_idx] if isinstance(loaders, list | tuple) else loaders
            assert loader is not None  # a validation batch has started: there are validation loaders
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
        if dataloader_idx != self.loader_idx:
            return
        embeddings = self.to_metric_device(outputs[self.embeddings_key].detach().float())
        self.metric.update(embeddings=embeddings, indices=outputs[self.index_key])
        # computed after the loader's last batch, not on_validation_epoch_end: there Lightning no longer knows
        # the loader, and the metrics of several loaders would be logged under the same keys
        if batch_idx == trainer.num_val_batches[dataloader_idx] - 1:
            self.calc_and_log_metrics(trainer, pl_module)

    def to_metric_device(self, embeddings: Tensor) -> Tensor:
        """Where the metric keeps the embeddings: on the CPU (the memory of the accelerator stays free)."""
        return embeddings.cpu()

    def calc_and_log_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Gather the metric's data from every process (``IMetricDDP``), compute the metrics, log them (in every
        process: checkpointing monitors them) and the figures."""
        from oml_core.metrics import flatten_metrics

        if isinstance(self.metric, IMetricDDP):
            self.metric.sync()
        metrics = {key: float(value) for key, value in flatten_metrics(self.metric.compute_metrics()).items()}
        self.last_metrics = metrics
        # every process has the same metrics: sync_dist averages equal values (and silences Lightning's warning)
        pl_module.log_dict(metrics, add_dataloader_idx=True, batch_size=1, sync_dist=True)
        if self.log_images:
            self._log_figures(trainer)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.world_size > 1 and not check_loaders_is_patched(trainer.val_dataloaders):
            raise RuntimeError(
                f"{type(self).__name__}: the validation loaders are not patched to DDP, so every process would "
                "validate on the whole dataset; use ModuleDDP (ExtractorModuleDDP) and do not pass loaders "
                "to trainer.fit/validate, or patch them with patch_dataloader_to_ddp"
            )

    @rank_zero_only
    def _log_figures(self, trainer: pl.Trainer) -> None:
        epoch = trainer.current_epoch
        folder = None if self.figures_dir is None else self.figures_dir / f"epoch_{epoch}"
        assert isinstance(self.metric, IMetricVisualisable)  # __init__ checks it when log_images
        save_figures(self.metric, folder, trainer.loggers, epoch)


#: The characters of a figure's title that its file name replaces with ``_``: all but letters, digits and
#: ``._@=+-`` (no path separator, so that the file stays in its folder).
UNSAFE_IN_FILE_NAMES = re.compile(r"[^\w.@=+-]")


def save_figures(
    metric: IMetricVisualisable, folder: Path | None, loggers: Sequence[Any], idx: int
) -> list[Path]:
    """Draw ``metric``'s figures (the worst queries of every per-query metric), log each to the loggers that
    take figures and, when ``folder`` is given, write it to ``folder/<title>.png`` (with
    :data:`UNSAFE_IN_FILE_NAMES` made ``_``: the file stays in ``folder``); the figures are closed.

    Returns:
        The PNG files written.
    """
    import matplotlib.pyplot as plt

    paths = []
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    for figure, title in zip(*metric.visualize()):
        if folder is not None:
            paths.append(folder / f"{UNSAFE_IN_FILE_NAMES.sub('_', title)}.png")
            figure.savefig(paths[-1], format="png")  # given, so that "...png" gets no second ".png"
        for logger in loggers:
            if isinstance(logger, IFigureLogger):
                logger.log_figure(figure, title, idx)
        plt.close(figure)
    return paths


class MetricValCallbackDDP(MetricValCallback):
    """:class:`MetricValCallback` that accepts only a metric with ``sync()`` (``IMetricDDP``): oml's name from
    before ``MetricValCallback`` worked under DDP by itself (OML 3.x's ``MetricValCallbackDDP``).

    Args:
        metric: A metric with ``sync()`` (``IMetricDDP``, e.g. ``EmbeddingMetrics``).
        args, kwargs: The other arguments of :class:`MetricValCallback`.

    Raises:
        TypeError: ``metric`` is not an ``IMetricDDP``.
    """

    metric: IMetricDDP

    def __init__(self, metric: IMetricDDP, *args: Any, **kwargs: Any):
        if not isinstance(metric, IMetricDDP):
            raise TypeError(f"MetricValCallbackDDP needs an IMetricDDP metric, got {type(metric).__name__}")
        super().__init__(metric, *args, **kwargs)


__all__ = ["MetricValCallback", "MetricValCallbackDDP", "save_figures"]
