"""MLflow logger of the pipelines (extra ``oml-loggers[mlflow]``)."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from matplotlib.figure import Figure
from pytorch_lightning.loggers import MLFlowLogger
from pytorch_lightning.loggers.logger import rank_zero_experiment
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from oml_loggers.base import PipelineLoggerBase
from oml_loggers.clients import import_client, preserved_random_state, set_offline_environment
from oml_loggers.lifetime import end_open_runs
from oml_loggers.pipeline_info import PipelineInfo

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

#: File name of the sqlite database used when no tracking uri is given.
DATABASE_NAME = "mlflow.db"
#: Folder (under ``save_dir``) of the artifacts of that database's experiments.
ARTIFACTS_DIR = "artifacts"
#: Artifact folder of the figures: ``figures/<title>/<idx>.png``.
FIGURES_DIR = "figures"
#: Tracking-uri schemes of stores on this machine (``""``: a plain path).
LOCAL_SCHEMES = frozenset({"", "file", "sqlite"})
#: Tracking uris without a scheme that name a remote service, not a folder.
REMOTE_NAMES = frozenset({"databricks", "databricks-uc", "uc"})
#: Set (unless already set) when the store is local: MLflow's usage telemetry, which otherwise fetches its
#: config from ``config.mlflow-telemetry.io`` when a run or an experiment is created and then posts events.
OFFLINE_ENVIRONMENT = {"MLFLOW_DISABLE_TELEMETRY": "true"}


class MLFlowPipelineLogger(MLFlowLogger, PipelineLoggerBase):
    """Lightning's ``MLFlowLogger`` that also logs figures and the pipeline's info.

    The tracking uri is ``tracking_uri``, else the environment variable ``MLFLOW_TRACKING_URI``, else a local
    sqlite database ``save_dir/mlflow.db`` whose experiments keep their artifacts in ``save_dir/artifacts``
    (nothing leaves the machine). MLflow's file store (``file:./ml-runs``, as in OML's examples) works too
    where MLflow allows it: MLflow 3 asks for ``MLFLOW_ALLOW_FILE_STORE=true``.

    With a local store (a ``file:`` or ``sqlite:`` uri, a path, or the default database) MLflow's usage
    telemetry is turned off for the process: ``MLFLOW_DISABLE_TELEMETRY=true``, unless that variable is
    already set (a value the user gave is kept).

    Logged: metrics (``log_metrics``), hyper-parameters (the config flattened with ``/``), figures as the
    artifacts ``figures/<title>/<idx>.png``, and by :meth:`log_pipeline_info` the artifacts ``config.yaml``,
    ``dataset/<dataframe>`` and ``code/oml_core/...``, and each tag as a run tag ``<tag>: "tag"`` (as OML).

    Args:
        experiment_name: The MLflow experiment (created when missing).
        run_name: Name of the new run.
        tracking_uri: Where runs are tracked (``sqlite:///...``, ``http://...``, ``file:...``).
        tags: Tags of the new run (a dict).
        save_dir: Folder of the local sqlite database when no tracking uri is given.
        log_model: Log checkpoints as artifacts: ``True`` at the end, ``"all"`` as they are saved.
        prefix: Prefix of the metric keys.
        artifact_location: Artifact location of a newly created experiment.
        run_id: Resume this run instead of creating one.
        synchronous: Log synchronously (``None``: MLflow's default).

    Raises:
        ImportError: mlflow is not installed (``pip install 'oml-loggers[mlflow]'``).
        ValueError: the tracking uri is a file store that MLflow refuses without ``MLFLOW_ALLOW_FILE_STORE``.
    """

    def __init__(
        self,
        experiment_name: str = "lightning_logs",
        run_name: str | None = None,
        tracking_uri: str | None = None,
        tags: dict[str, Any] | None = None,
        save_dir: str | Path = "./mlruns",
        log_model: Literal[True, False, "all"] = False,
        prefix: str = "",
        artifact_location: str | None = None,
        run_id: str | None = None,
        synchronous: bool | None = None,
    ) -> None:
        tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if tracking_uri is None or is_local_tracking_uri(tracking_uri):
            set_offline_environment(type(self).__name__, OFFLINE_ENVIRONMENT)  # before mlflow reads it
        mlflow = import_client("mlflow", "mlflow", type(self).__name__)
        local_dir: Path | None = None
        if tracking_uri:
            _check_file_store_allowed(mlflow, tracking_uri, type(self).__name__)
        else:
            local_dir = Path(save_dir).expanduser().resolve()
            local_dir.mkdir(parents=True, exist_ok=True)
            tracking_uri = f"sqlite:///{local_dir / DATABASE_NAME}"
            artifact_location = artifact_location or (local_dir / ARTIFACTS_DIR).as_uri()
        super().__init__(
            experiment_name=experiment_name,
            run_name=run_name,
            tracking_uri=tracking_uri,
            tags=tags,
            save_dir=str(save_dir),
            log_model=log_model,
            prefix=prefix,
            artifact_location=artifact_location,
            run_id=run_id,
            synchronous=synchronous,
        )
        self._local_dir = local_dir

    @property
    @rank_zero_experiment
    def experiment(self) -> MlflowClient:
        """The ``MlflowClient``; on first use the experiment and the run are created, after the runs other
        pipeline loggers left open are ended (:func:`~oml_loggers.lifetime.end_open_runs`), inside
        :func:`~oml_loggers.clients.preserved_random_state` (MLflow draws a run name without ``run_name``)."""
        if not self._initialized:
            end_open_runs()
            with preserved_random_state():
                return super().experiment
        return super().experiment

    @property
    def save_dir(self) -> str | None:
        """The local folder of the runs: the sqlite database's folder, or the file store's; ``None`` for a
        remote tracking server."""
        return str(self._local_dir) if self._local_dir is not None else super().save_dir

    @rank_zero_only
    def log_figure(self, fig: Figure, title: str, idx: int) -> None:
        """Log ``fig`` as the PNG artifact ``figures/<title>/<idx>.png``."""
        self.experiment.log_figure(self.run_id, fig, f"{FIGURES_DIR}/{title}/{idx}.png")

    def _log_tags(self, tags: list[str]) -> None:
        for tag in tags:
            self.experiment.set_tag(self.run_id, tag, "tag")

    def _log_pipeline_files(self, info: PipelineInfo) -> None:
        with info.written() as folder:
            self.experiment.log_artifacts(self.run_id, str(folder))


def is_local_tracking_uri(tracking_uri: str) -> bool:
    """True for a tracking uri of a store on this machine: ``file:``, ``sqlite:`` or a plain path (a Windows
    drive letter included); False for a server (``http(s)://``, ``databricks``, a database server)."""
    if tracking_uri.strip().lower() in REMOTE_NAMES:
        return False
    scheme = urlparse(tracking_uri).scheme.lower()
    return scheme in LOCAL_SCHEMES or len(scheme) == 1


def _check_file_store_allowed(mlflow: ModuleType, tracking_uri: str, logger_name: str) -> None:
    """Raise ``ValueError`` when ``tracking_uri`` is a file store and this MLflow refuses file stores unless
    ``MLFLOW_ALLOW_FILE_STORE`` is true (MLflow 3; older versions have no such variable and allow them)."""
    from mlflow import environment_variables

    allow = getattr(environment_variables, "MLFLOW_ALLOW_FILE_STORE", None)
    if allow is None or allow.get() or urlparse(tracking_uri).scheme not in ("", "file"):
        return
    raise ValueError(
        f"{logger_name}: the tracking uri {tracking_uri!r} is MLflow's file store, which MLflow "
        f"{mlflow.__version__} refuses unless the environment variable MLFLOW_ALLOW_FILE_STORE=true is set. "
        f"Set it, or track in a database (tracking_uri: 'sqlite:///<folder>/mlflow.db'), or give no tracking "
        f"uri (and no MLFLOW_TRACKING_URI) for a local sqlite database under save_dir."
    )


__all__ = ["MLFlowPipelineLogger", "is_local_tracking_uri"]
