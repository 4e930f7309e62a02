"""TensorBoard logger of the pipelines (the default logger when a config names none)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from pytorch_lightning.loggers import TensorBoardLogger
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from oml_core.interfaces.loggers import IPipelineLogger
from oml_loggers.config import CONFIG_FILE_NAME, cfg_to_yaml


class TensorBoardPipelineLogger(TensorBoardLogger, IPipelineLogger):
    """Lightning's ``TensorBoardLogger`` that also logs figures and the pipeline's config.

    Logs go to ``log_dir = save_dir/name/version_<n>`` (``save_dir/version_<n>`` with the default
    ``name=""``), exactly as ``TensorBoardLogger`` lays them out.

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

    @rank_zero_only
    def log_figure(self, fig: Figure, title: str, idx: int) -> None:
        """Log the matplotlib ``fig`` as an image with the tag ``title`` at step ``idx`` (closes ``fig``)."""
        self.experiment.add_figure(title, fig, idx)

    @rank_zero_only
    def log_pipeline_info(self, cfg: dict[str, Any] | Any) -> None:
        """Store the config ``cfg`` (a dict or a ``DictConfig``) as YAML.

        The YAML (see :func:`oml_loggers.config.cfg_to_yaml`) is written to ``log_dir/config.yaml`` and
        logged as the text ``config`` (a fenced YAML block, shown in TensorBoard's Text tab).
        """
        text = cfg_to_yaml(cfg)
        log_dir = Path(self.log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / CONFIG_FILE_NAME).write_text(text, encoding="utf-8")
        self.experiment.add_text("config", f"```yaml\n{text}```", 0)
        self.experiment.flush()


__all__ = ["TensorBoardPipelineLogger"]
