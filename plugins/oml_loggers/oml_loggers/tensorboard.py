"""TensorBoard logger of the pipelines (the default logger when a config names none)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure
from pytorch_lightning.loggers import TensorBoardLogger
from pytorch_lightning.loggers.logger import rank_zero_experiment
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from oml_loggers.base import PipelineLoggerBase
from oml_loggers.lifetime import end_open_runs
from oml_loggers.pipeline_info import PipelineInfo

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


class TensorBoardPipelineLogger(TensorBoardLogger, PipelineLoggerBase):
    """Lightning's ``TensorBoardLogger`` that also logs figures and the pipeline's info.

    Logs go to ``log_dir = save_dir/name/version_<n>`` (``save_dir/version_<n>`` with the default
    ``name=""``), exactly as ``TensorBoardLogger`` lays them out. :meth:`log_pipeline_info` logs the config
    as hyper-parameters (``hparams.yaml`` and TensorBoard's HParams tab) and as the text ``config``, the tags
    as the text ``tags``, and writes ``config.yaml``, ``dataset/<dataframe>`` and ``code/oml_core/...``
    (the source snapshot) into ``log_dir``.

    Args:
        save_dir: Root directory of the logs.
        name: Experiment name, a sub-directory of ``save_dir`` (none by default).
        version: Experiment version; ``None`` takes the next free ``version_<n>``.
        kwargs: Passed on to ``TensorBoardLogger`` (``log_graph``, ``default_hp_metric``, ``prefix``,
            ``sub_dir``) and from there to ``SummaryWriter``.
    """

    def __init__(
        self, save_dir: str | Path, name: str | None = "", version: int | str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(save_dir=save_dir, name=name, version=version, **kwargs)

    @property
    @rank_zero_experiment
    def experiment(self) -> SummaryWriter:
        """The ``SummaryWriter``, created on first use after the runs other pipeline loggers left open are ended
        (:func:`~oml_loggers.lifetime.end_open_runs`)."""
        if self._experiment is None:
            end_open_runs()
        return super().experiment

    @rank_zero_only
    def log_figure(self, fig: Figure, title: str, idx: int) -> None:
        """Log the matplotlib ``fig`` as an image with the tag ``title`` at step ``idx`` (closes ``fig``)."""
        self.experiment.add_figure(title, fig, idx)

    def _log_tags(self, tags: list[str]) -> None:
        """Log the tags as the text ``tags`` (comma-separated)."""
        self.experiment.add_text("tags", ", ".join(tags), 0)

    def _log_pipeline_files(self, info: PipelineInfo) -> None:
        """Write the files into ``log_dir`` and log the config YAML as the text ``config`` (a fenced YAML
        block, shown in TensorBoard's Text tab)."""
        info.write(Path(self.log_dir))
        self.experiment.add_text("config", f"```yaml\n{info.config_yaml}```", 0)
        self.experiment.flush()


__all__ = ["TensorBoardPipelineLogger"]
