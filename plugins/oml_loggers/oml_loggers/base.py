"""The part of ``log_pipeline_info`` that every pipeline logger shares."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from pytorch_lightning.utilities.rank_zero import rank_zero_only

from oml_core.interfaces.loggers import IPipelineLogger
from oml_loggers.pipeline_info import PipelineInfo


class PipelineLoggerBase(IPipelineLogger):
    """A pipeline logger whose :meth:`log_pipeline_info` logs what :class:`PipelineInfo` gathers.

    It logs the config as hyper-parameters (through the logger's own ``log_hyperparams``), then the tags
    (:meth:`_log_tags`) and the files: the config as YAML, the dataframe(s) and the source snapshot
    (:meth:`_log_pipeline_files`). A subclass names a Lightning logger (or implements ``Logger`` itself) and
    implements the two hooks and ``log_figure``.
    """

    @rank_zero_only
    def log_pipeline_info(self, cfg: dict[str, Any] | Any) -> None:
        """Log the config ``cfg`` (a dict or a ``DictConfig``) as hyper-parameters and as a YAML file, its
        ``tags`` (and ``postfix``), the dataframe it names (``dataset_root / dataframe_name``, when it exists)
        and a snapshot of the ``oml_core`` source."""
        info = PipelineInfo.from_config(cfg)
        self.log_hyperparams(info.config)
        if info.tags:
            self._log_tags(info.tags)
        self._log_pipeline_files(info)

    @abstractmethod
    def _log_tags(self, tags: list[str]) -> None:
        """Attach ``tags`` (non-empty) to the run."""

    @abstractmethod
    def _log_pipeline_files(self, info: PipelineInfo) -> None:
        """Store the config YAML, the dataframes and the source of ``info`` with the run."""


__all__ = ["PipelineLoggerBase"]
