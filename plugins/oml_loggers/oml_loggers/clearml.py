"""ClearML logger of the pipelines (extra ``oml-loggers[clearml]``), written on ClearML's ``Task`` API
(Lightning has no ClearML logger)."""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
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
    from clearml import Task

#: ``Task.init``'s ``auto_connect_frameworks`` with every automatic binding off (``False`` alone does not turn
#: off the repository detection): the logger reports what the pipeline gives it, and ClearML patching
#: torch.save, matplotlib, TensorBoard or hydra would report the same things twice.
NO_AUTO_CONNECT = {
    name: False
    for name in (
        "matplotlib",
        "tensorflow",
        "tensorboard",
        "pytorch",
        "xgboost",
        "scikit",
        "fastai",
        "lightgbm",
        "hydra",
        "detect_repository",
        "tfdefines",
        "joblib",
        "megengine",
        "catboost",
        "gradio",
    )
}
#: The environment variables of ClearML's credentials (a ``clearml.conf`` may hold them instead).
CREDENTIAL_VARIABLES = ("CLEARML_API_ACCESS_KEY", "CLEARML_API_SECRET_KEY")


class ClearMLPipelineLogger(ClientRunLogger):
    """A Lightning logger to a ClearML task that also logs figures and the pipeline's info.

    With ``offline_mode=True`` (the default, as in OML) the task is kept in ClearML's offline folder
    (``<cache>/offline/<task id>`` and its ``.zip`` once closed; the cache is ``CLEARML_CACHE_DIR`` or
    ``~/.clearml/cache``) for a later ``Task.import_offline_session``. Online logging needs
    ``CLEARML_API_ACCESS_KEY`` and ``CLEARML_API_SECRET_KEY`` or a ``clearml.conf`` (``clearml-init``).
    ClearML keeps one task per process; the task is created on first use, or is the task already running in the
    process (``Task.current_task()``, started by the caller), which is logged into and never closed here.

    One task per pipeline (see :mod:`oml_loggers.lifetime`): :meth:`finalize`, called at the end of every Trainer
    stage, flushes the task and keeps it open after a successful stage; the task is closed by a failed stage,
    :meth:`close`, the next pipeline logger's run, or the end of the process.

    The logger leaves the training as it is. ``Task.init`` seeds ``random``, ``numpy`` and ``torch`` (CUDA
    included) with the task's seed (1337 unless ``Task.set_random_seed`` changed it: ClearML's
    ``make_deterministic``), which replaced the random state that the pipeline's ``seed`` had set (the pipeline
    logs its config, so creates the task, after seeding) and made the same seed train to other weights. The task
    is created with that seeding turned off (ClearML's default seed is restored afterwards for the caller's own
    tasks, and the task records no seed of its own) and inside
    :func:`~oml_loggers.clients.preserved_random_state` (``Task.init`` also draws a callback handle from
    ``random``): the pipeline's ``seed`` is the run's only seed.

    Logged: each metric as the scalar ``title = series = <name>``, the config as the hyper-parameters
    ``General/<flattened key>``, figures as debug images (``report_matplotlib_figure``), the tags, and the
    artifacts ``config`` (``config.yaml``), ``dataset`` (a zip of the dataframe) and ``code`` (a zip of
    ``oml_core/...``).

    On Linux ClearML reports through a subprocess that it waits for when flushing (seconds); set
    ``sdk.development.report_use_subprocess: false`` in ``clearml.conf`` to report from a thread instead.

    Offline, nothing leaves the machine with the default ``auto_connect_frameworks``. Turning the repository
    detection on (``auto_connect_frameworks=True``, or a mapping without ``detect_repository: False``) makes
    ClearML also ask ``https://updates.clear.ml/updates`` for a newer version
    (``CheckPackageUpdates.check_new_package_available``, from ``Task._update_repository``), offline mode or not;
    no ClearML setting turns that request off.

    Args:
        project_name: The ClearML project.
        task_name: The task's name.
        task_type: One of ClearML's task types (``training``, ``testing``, ...).
        offline_mode: Keep the task offline (nothing is sent).
        auto_connect_frameworks: ``Task.init``'s automatic bindings; ``False`` turns all of them off,
            repository detection included.
        task_init_kwargs: Passed on to ``Task.init`` (``tags``, ``output_uri``, ``auto_connect_streams``, ...);
            ``auto_connect_arg_parser`` is False unless given (ClearML's argparse binding stays off).

    Raises:
        ImportError: clearml is not installed (``pip install 'oml-loggers[clearml]'``).
        MissingCredentialsError: online mode without credentials.
        TypeError: an argument ``Task.init`` does not accept.
    """

    def __init__(
        self,
        project_name: str | None = None,
        task_name: str | None = None,
        task_type: str = "training",
        offline_mode: bool = True,
        auto_connect_frameworks: bool | Mapping[str, Any] = False,
        **task_init_kwargs: Any,
    ) -> None:
        clearml = import_client("clearml", "clearml", type(self).__name__)
        check_client_kwargs(type(self).__name__, clearml.Task.init, task_init_kwargs)
        offline_from_env = os.environ.get("CLEARML_OFFLINE_MODE", "").lower() in ("1", "true")
        self._offline_mode = offline_mode or offline_from_env
        if not self._offline_mode:
            _require_clearml_credentials(type(self).__name__)
        super().__init__()
        self._init_kwargs = {
            "project_name": project_name,
            "task_name": task_name,
            "task_type": clearml.Task.TaskTypes(task_type),
            "auto_connect_frameworks": auto_connect_frameworks or NO_AUTO_CONNECT,
            # the config is logged by the pipeline; ClearML's argparse binding would patch the process's
            # argparse for good: every later parse_args (the caller's own, oml's CLI) reaching the task
            # after it closed, which retries a server for minutes
            "auto_connect_arg_parser": False,
            **task_init_kwargs,
        }
        self._task: Task | None = None
        self._owns_task = False

    @property
    @rank_zero_experiment
    def experiment(self) -> Task:
        """The ClearML ``Task``: the task running in the process, else a new one (after the runs other pipeline
        loggers left open are ended; again after :meth:`close`)."""
        if self._task is None:
            from clearml import Task

            end_open_runs()
            if self._offline_mode:
                Task.set_offline(offline_mode=True)
            with _without_task_seeding(Task), preserved_random_state():
                running: Task | None = Task.current_task()
                self._owns_task = running is None
                self._task = Task.init(**self._init_kwargs) if running is None else running
        return self._task

    @property
    def name(self) -> str:
        """The task's name: ``task_name``, or the name ClearML gave the task when none was given."""
        return str(self._init_kwargs["task_name"] or self.experiment.name)

    @property
    def version(self) -> str:
        """The task's id (``offline-...`` for an offline task)."""
        return str(self.experiment.id)

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Report each value as the scalar ``title = series = <name>`` at iteration ``step`` (0 if ``None``)."""
        reporter = self.experiment.get_logger()
        for name, value in metrics.items():
            reporter.report_scalar(title=name, series=name, value=float(value), iteration=step or 0)

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        """Connect ``params`` to the task (section ``General``; nested keys joined with ``/``)."""
        params = vars(params) if isinstance(params, Namespace) else dict(params)
        self.experiment.connect(params)

    @rank_zero_only
    def log_figure(self, fig: Figure, title: str, idx: int) -> None:
        """Report ``fig`` as a debug image of ``title`` at iteration ``idx``."""
        self.experiment.get_logger().report_matplotlib_figure(
            title=title, series="", figure=fig, iteration=idx, report_image=True
        )

    def _log_tags(self, tags: list[str]) -> None:
        self.experiment.add_tags(tags)

    def _log_pipeline_files(self, info: PipelineInfo) -> None:
        task = self.experiment
        with info.written_parts() as parts:
            for name, path in parts:
                task.upload_artifact(name=name, artifact_object=path, wait_on_upload=True)

    def _open_run(self) -> Task | None:
        return self._task

    def _flush_run(self, run: Task, status: str) -> None:
        """Send (offline: write) what was reported and uploaded so far."""
        run.flush(wait_for_uploads=True)

    def _end_run(self, run: Task, status: str) -> None:
        """Flush and close the task if this logger created it (offline: the session folder is zipped; ClearML sets
        the closed task's status itself); forget it."""
        if self._owns_task:
            run.flush(wait_for_uploads=True)
            with _exit_record_cleared(type(run)):
                run.close()
        self._task = None


@contextmanager
def _without_task_seeding(task_class: type[Task]) -> Iterator[None]:
    """Inside the block, ``Task.init`` leaves the random generators alone (``Task.set_random_seed(None)``); the
    seed ClearML had is restored on exit."""
    previous = task_class._random_seed
    task_class.set_random_seed(None)
    try:
        yield
    finally:
        task_class.set_random_seed(previous)


@contextmanager
def _exit_record_cleared(task_class: type[Task]) -> Iterator[None]:
    """Inside the block, ClearML's exit hook holds no exit code, signal or exception; what it held is put back on exit.

    ``Task.init`` replaces ``sys.exit`` for the rest of the process with a hook (``Task.__exit_hook``, one per
    process) that records the code of every call, also of a ``SystemExit`` that is caught (argparse's ``error``, a
    plugin's import that oml's registry survives), and the signals it sees; nothing clears that record.
    ``Task.close`` reads it as the process ending: it then skips the flush, leaves the task's reporter thread and
    ClearML's upload threads running and marks the task failed. The logger closes its task while the process goes
    on, so the close must not count an earlier exit that the process survived (the thread left running would
    report, later, to whatever ClearML's offline switch then says; at the end of the process ClearML's exit
    handler waits for it).
    """
    hook = getattr(task_class, "_Task__exit_hook", None)
    if hook is None:
        yield
        return
    recorded = (hook.exit_code, hook.signal, hook.exception)
    hook.exit_code = hook.signal = hook.exception = None
    try:
        yield
    finally:
        hook.exit_code, hook.signal, hook.exception = recorded


def _require_clearml_credentials(logger_name: str) -> None:
    """Raise :class:`MissingCredentialsError` unless the credentials are in the environment or ClearML finds a
    configuration file (``CLEARML_CONFIG_FILE`` or ``~/clearml.conf``)."""
    from clearml.backend_config.defs import get_active_config_file

    missing = missing_env(*CREDENTIAL_VARIABLES)
    if missing and get_active_config_file() is None:
        require_credentials(
            logger_name,
            "ClearML",
            missing,
            "offline_mode: true (the session is kept in ClearML's offline folder; upload it with "
            "Task.import_offline_session), or create a clearml.conf with `clearml-init`",
        )


__all__ = ["ClearMLPipelineLogger"]
