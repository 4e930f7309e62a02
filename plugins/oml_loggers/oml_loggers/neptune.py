"""Neptune logger of the pipelines (extra ``oml-loggers[neptune]``), written on the ``neptune`` client's own
API (Lightning's ``NeptuneLogger`` is a stub in recent versions)."""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure
from pytorch_lightning.loggers.logger import rank_zero_experiment
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from oml_loggers.clients import (
    check_client_kwargs,
    import_client,
    missing_env,
    preserved_random_state,
    require_credentials,
)
from oml_loggers.lifetime import ClientRunLogger, end_open_runs
from oml_loggers.pipeline_info import PipelineInfo

if TYPE_CHECKING:
    from neptune import Run
    from pytorch_lightning.callbacks import ModelCheckpoint

#: Neptune modes that need no account (the ``mode`` argument or ``NEPTUNE_MODE``).
LOCAL_MODES = frozenset({"offline", "debug"})
#: The environment variable of Neptune's local data folder (``./.neptune`` by default).
DATA_DIRECTORY_ENV = "NEPTUNE_DATA_DIRECTORY"


class NeptunePipelineLogger(ClientRunLogger):
    """A Lightning logger to a Neptune run that also logs figures and the pipeline's info.

    Online modes (``async``, the default, ``sync``, ``read-only``) need ``NEPTUNE_API_TOKEN`` (or
    ``api_key``) and ``NEPTUNE_PROJECT`` (or ``project``); ``mode="offline"`` keeps the run in
    ``<save_dir>/.neptune/offline/`` for a later ``neptune sync``. The run is created on first use.

    Fields of the run: ``<prefix>/<metric>`` (series with their steps), ``<prefix>/hyperparams`` (the config),
    ``<title>`` (a series of figure images), ``sys/tags``, ``config`` (``config.yaml``), ``dataset`` and
    ``code`` (file sets: the dataframe, the ``oml_core`` source files), ``<prefix>/status`` and, with
    ``log_model_checkpoints``, ``<prefix>/model/checkpoints/<name>`` and ``<prefix>/model/best_model_path``.
    File sets are uploaded from where the files are, when the run is sent (offline: by ``neptune sync``).

    Args:
        api_key: Neptune API token (``NEPTUNE_API_TOKEN`` when ``None``).
        project: ``workspace/project`` (``NEPTUNE_PROJECT`` when ``None``).
        name: Name of the run.
        mode: ``async``, ``sync``, ``offline``, ``debug`` or ``read-only`` (``NEPTUNE_MODE``, else ``async``).
        save_dir: Folder of Neptune's local data (``<save_dir>/.neptune``); ``None``: ``NEPTUNE_DATA_DIRECTORY``
            or ``./.neptune``.
        log_model_checkpoints: Upload the best and the last checkpoint whenever they are saved.
        prefix: Namespace of the metrics, hyper-parameters and checkpoints.
        neptune_run_kwargs: Passed on to ``neptune.init_run`` (``tags``, ``capture_stdout``, ...).

    Raises:
        ImportError: neptune is not installed (``pip install 'oml-loggers[neptune]'``).
        MissingCredentialsError: an online mode without the token or the project.
        TypeError: an argument ``neptune.init_run`` does not accept.
    """

    def __init__(
        self,
        api_key: str | None = None,
        project: str | None = None,
        name: str | None = None,
        mode: str | None = None,
        save_dir: str | Path | None = None,
        log_model_checkpoints: bool = True,
        prefix: str = "training",
        **neptune_run_kwargs: Any,
    ) -> None:
        neptune = import_client("neptune", "neptune", type(self).__name__)
        check_client_kwargs(type(self).__name__, neptune.init_run, neptune_run_kwargs)
        mode = mode or os.environ.get("NEPTUNE_MODE") or "async"
        if mode not in LOCAL_MODES:
            missing = missing_env("NEPTUNE_API_TOKEN") if api_key is None else []
            missing += missing_env("NEPTUNE_PROJECT") if project is None else []
            require_credentials(
                type(self).__name__,
                "Neptune",
                missing,
                "mode: offline (runs are kept in <save_dir>/.neptune/offline; upload them with `neptune sync`)",
            )
        super().__init__()
        self._init_kwargs = {"api_token": api_key, "project": project, "name": name, "mode": mode}
        self._init_kwargs.update(neptune_run_kwargs)
        self._save_dir = Path(save_dir).expanduser().resolve() / ".neptune" if save_dir is not None else None
        self._log_model_checkpoints = log_model_checkpoints
        self._prefix = prefix
        self._run: Run | None = None

    @property
    @rank_zero_experiment
    def experiment(self) -> Run:
        """The ``neptune.Run``, created on first use (after the runs other pipeline loggers left open are ended;
        again after :meth:`close`)."""
        if self._run is None:
            import neptune

            end_open_runs()
            with _environment(DATA_DIRECTORY_ENV, self._save_dir), preserved_random_state():
                self._run = neptune.init_run(**self._init_kwargs)
        return self._run

    @property
    def name(self) -> str:
        """The run's name (``Untitled``, Neptune's default, when none was given)."""
        return self._init_kwargs["name"] or "Untitled"

    @property
    def version(self) -> str:
        """The run's id: Neptune's ``sys/id`` online, the local id of an offline run."""
        run = self.experiment
        return run["sys/id"].fetch() if run.exists("sys/id") else run.get_url().rpartition("/")[2]

    @property
    def save_dir(self) -> str | None:
        """Neptune's local data folder when ``save_dir`` was given."""
        return str(self._save_dir) if self._save_dir is not None else None

    def _key(self, name: str) -> str:
        return f"{self._prefix}/{name}" if self._prefix else name

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Append each value to the series ``<prefix>/<name>`` at ``step``."""
        for name, value in metrics.items():
            self.experiment[self._key(name)].append(value, step=step)

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        """Assign ``params`` (nested dicts become namespaces) to ``<prefix>/hyperparams``."""
        from neptune.utils import stringify_unsupported

        params = vars(params) if isinstance(params, Namespace) else dict(params)
        self.experiment[self._key("hyperparams")] = stringify_unsupported(params)

    @rank_zero_only
    def log_figure(self, fig: Figure, title: str, idx: int) -> None:
        """Append ``fig`` as an image to the series ``title`` at step ``idx``."""
        from neptune.types import File

        self.experiment[title].append(File.as_image(fig), step=idx)

    def _log_tags(self, tags: list[str]) -> None:
        self.experiment["sys/tags"].add(tags)

    def _log_pipeline_files(self, info: PipelineInfo) -> None:
        from neptune.types import File

        run = self.experiment
        run["config"].upload(File.from_content(info.config_yaml, extension="yaml"))
        if info.dataframes:
            run["dataset"].upload_files([str(path) for path in info.dataframes])
        run["code"].upload_files([str(path) for path in info.source_paths])

    @rank_zero_only
    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        """With ``log_model_checkpoints``, upload the best and the last checkpoint and record the best path."""
        if not self._log_model_checkpoints:
            return
        run = self.experiment
        paths = {checkpoint_callback.best_model_path, checkpoint_callback.last_model_path} - {""}
        for path in sorted(paths):
            run[self._key(f"model/checkpoints/{Path(path).stem}")].upload(path)
        if checkpoint_callback.best_model_path:
            run[self._key("model/best_model_path")] = checkpoint_callback.best_model_path

    def _open_run(self) -> Run | None:
        return self._run

    def _flush_run(self, run: Run, status: str) -> None:
        """Record ``status`` as ``<prefix>/status``."""
        run[self._key("status")] = status

    def _end_run(self, run: Run, status: str) -> None:
        """Record ``status`` as ``<prefix>/status``, stop the run and forget it."""
        run[self._key("status")] = status
        run.stop()
        self._run = None


@contextmanager
def _environment(variable: str, value: Path | None) -> Iterator[None]:
    """Set the environment variable ``variable`` to ``value`` inside the block (nothing when ``None``)."""
    if value is None:
        yield
        return
    previous = os.environ.get(variable)
    os.environ[variable] = str(value)
    try:
        yield
    finally:
        if previous is None:
            del os.environ[variable]
        else:
            os.environ[variable] = previous


__all__ = ["NeptunePipelineLogger"]
