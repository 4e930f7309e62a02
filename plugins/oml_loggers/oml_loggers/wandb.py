"""Weights & Biases logger of the pipelines (extra ``oml-loggers[wandb]``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from matplotlib.figure import Figure
from pytorch_lightning.loggers import WandbLogger
from pytorch_lightning.loggers.logger import rank_zero_experiment
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from oml_core.utils.images.images import figure_to_array
from oml_loggers.clients import (
    check_client_kwargs,
    import_client,
    missing_env,
    preserved_random_state,
    require_credentials,
    set_offline_environment,
)
from oml_loggers.lifetime import ClientRunLogger, end_open_runs
from oml_loggers.pipeline_info import PipelineInfo

if TYPE_CHECKING:
    from wandb.sdk.lib import RunDisabled
    from wandb.wandb_run import Run

#: W&B modes that need no account (``WANDB_MODE`` or the ``mode`` argument).
LOCAL_MODES = frozenset({"offline", "dryrun", "disabled"})
#: Set (unless already set) in a local mode, before W&B's service starts: W&B's error reporting and usage
#: analytics. Without it an offline run still records OpenTelemetry metrics in the process (each
#: ``run.log``), which are exported to W&B's server (``api.forge.coreweave.com``, the default ``base_url``)
#: every minute and at exit; ``wandb-core`` also gets ``--no-observability`` from it.
OFFLINE_ENVIRONMENT = {"WANDB_ERROR_REPORTING": "false"}


class WandBPipelineLogger(WandbLogger, ClientRunLogger):
    """Lightning's ``WandbLogger`` that also logs figures and the pipeline's info.

    Online logging needs ``WANDB_API_KEY`` in the environment; ``offline=True`` (or ``mode="offline"``, or
    ``WANDB_MODE=offline``) keeps the run in ``save_dir/wandb/offline-run-*`` for a later ``wandb sync``.
    In a local mode W&B's error reporting and usage analytics are turned off for the process
    (``WANDB_ERROR_REPORTING=false``, unless that variable is already set: a value the user gave is kept).

    Logged: metrics with ``trainer/global_step`` (``log_metrics``), the config as the run's config,
    figures as images under their title (``log_figure``), the tags as the run's tags, and the artifacts
    ``config`` (``config.yaml``), ``dataset`` (the dataframe) and ``code`` (``oml_core/...``), each of the
    type of its name; with ``log_model``, the checkpoints (``after_save_checkpoint``, at the end of a stage).

    One run per pipeline (see :mod:`oml_loggers.lifetime`): :meth:`finalize`, called at the end of every Trainer
    stage, keeps the run open after a successful stage; the run is finished (exit code 1 after a failed stage)
    by a failed stage, :meth:`close`, the next pipeline logger's run, or the end of the process. A run that was
    already in progress (``wandb.run``, started by the caller) is logged into, as Lightning does, and never
    finished here.

    Args:
        project: The W&B project (``WANDB_PROJECT`` or ``lightning_logs`` when ``None``).
        name: Display name of the run.
        save_dir: Folder of W&B's local files (``save_dir/wandb``).
        version: Run id, to resume a run.
        offline: Log offline (no account, nothing sent).
        log_model: Log checkpoints as artifacts: ``True`` at the end, ``"all"`` as they are saved.
        prefix: Prefix of the metric keys.
        kwargs: Passed on to ``wandb.init`` (``entity``, ``group``, ``tags``, ``mode``, ...).

    Raises:
        ImportError: wandb is not installed (``pip install 'oml-loggers[wandb]'``).
        MissingCredentialsError: online mode without ``WANDB_API_KEY``.
        TypeError: an argument ``wandb.init`` does not accept.
    """

    def __init__(
        self,
        project: str | None = None,
        name: str | None = None,
        save_dir: str | Path = ".",
        version: str | None = None,
        offline: bool = False,
        log_model: Literal["all"] | bool = False,
        prefix: str = "",
        **kwargs: Any,
    ) -> None:
        wandb = import_client("wandb", "wandb", type(self).__name__)
        check_client_kwargs(type(self).__name__, wandb.init, kwargs)
        requested_mode = kwargs.pop("mode", None)
        mode = "offline" if offline else requested_mode or os.environ.get("WANDB_MODE")
        if mode in LOCAL_MODES:
            set_offline_environment(type(self).__name__, OFFLINE_ENVIRONMENT)
        else:
            require_credentials(
                type(self).__name__,
                "Weights & Biases",
                missing_env("WANDB_API_KEY"),
                "offline: true (runs are kept in <save_dir>/wandb/offline-run-*; upload them with `wandb sync`)",
            )
        # the mode goes to wandb.init: Lightning's `offline=True` would set WANDB_MODE for the whole process
        super().__init__(
            name=name,
            save_dir=save_dir,
            version=version,
            project=project,
            log_model=log_model,
            prefix=prefix,
            mode=mode,
            **kwargs,
        )
        self._owns_run = False

    @property
    @rank_zero_experiment
    def experiment(self) -> Run | RunDisabled:
        """The W&B run, started on first use (after the runs other pipeline loggers left open are ended), or the
        run already in progress in the process (``wandb.run``)."""
        if self._experiment is None:
            import wandb

            end_open_runs()
            self._owns_run = wandb.run is None
            with preserved_random_state():
                return super().experiment
        return super().experiment

    @rank_zero_only
    def log_figure(self, fig: Figure, title: str, idx: int) -> None:
        """Log ``fig`` as an image under the key ``title``, with ``trainer/global_step = idx``."""
        self.log_image(key=title, images=[figure_to_array(fig)], step=idx)

    def _log_tags(self, tags: list[str]) -> None:
        run = self.experiment
        run.tags = tuple(dict.fromkeys([*(run.tags or ()), *tags]))

    def _log_pipeline_files(self, info: PipelineInfo) -> None:
        import wandb

        with info.written_parts() as parts:
            for name, path in parts:
                artifact = wandb.Artifact(name, type=name)
                if path.is_dir():  # "mutable": files are copied now, before the folder is removed
                    artifact.add_dir(str(path), policy="mutable")
                else:
                    artifact.add_file(str(path), policy="mutable")
                self.experiment.log_artifact(artifact)

    #: ``WandbLogger.finalize`` comes first in the MRO: the stage's end is :class:`ClientRunLogger`'s.
    finalize = ClientRunLogger.finalize

    def _open_run(self) -> Run | RunDisabled | None:
        return self._experiment

    def _flush_run(self, run: Run | RunDisabled, status: str) -> None:
        """Log the new checkpoints (``log_model``): ``WandbLogger.finalize``, which leaves the run open."""
        WandbLogger.finalize(self, status)

    def _end_run(self, run: Run | RunDisabled, status: str) -> None:
        """Finish the run if this logger started it (exit code 1 unless ``status`` is ``"success"``); forget it."""
        if self._owns_run:
            run.finish(exit_code=0 if status == "success" else 1)
        self._experiment = None


__all__ = ["WandBPipelineLogger", "figure_to_array"]
