"""The lifetime of a run of a client library (W&B, Neptune, ClearML): one run per pipeline, over all its stages.

Lightning calls a logger's ``finalize(status)`` at the end of every Trainer stage (``trainer.validate``,
``trainer.fit``, ...), not once per run, and a pipeline may run several stages into one run: the training
pipeline validates the initial weights (``trainer.validate``, ``validate_before_training``), then fits. A logger
that ended its run in ``finalize`` made every training two runs: the first with the config, the tags and the
epoch-0 metrics, the second (started by ``fit``) with the curves and the checkpoints.

So here a successful stage does not end the run: ``finalize("success")`` flushes it, and the next stage of the
same pipeline logs into the same run. The run ends

- when a stage fails (``finalize`` with any other status: an exception or an interrupt ends the pipeline);
- when another pipeline logger of this process (any of the five) starts its run: a pipeline builds one logger
  and a process runs its pipelines one after another, so a run that another logger left open after a successful
  stage belongs to a pipeline that is over (W&B and ClearML would otherwise hand that run to the next pipeline:
  Lightning's ``WandbLogger`` reuses ``wandb.run``, ``clearml.Task.init`` returns the open task; a Neptune run
  would record the next pipeline's console output);
- with :meth:`ClientRunLogger.close`, or :func:`end_open_runs` (in a notebook, or to read a run's local files
  before the process ends);
- at the end of the process, by the client's own exit hook (``oml train`` is one process per run).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

from pytorch_lightning.utilities.rank_zero import rank_zero_only

from oml_loggers.base import PipelineLoggerBase


class ClientRunLogger(PipelineLoggerBase):
    """A pipeline logger whose run is a client library's run, started on first use and ended as the module's
    docstring says. A subclass implements :meth:`_open_run`, :meth:`_flush_run` and :meth:`_end_run`, and
    calls :func:`end_open_runs` before it starts a run (as every pipeline logger does).
    """

    #: The loggers of this process whose run a successful stage left open, until it is ended (a logger that its
    #: pipeline no longer holds is still here: its run must end before the next one starts).
    _left_open: ClassVar[set[ClientRunLogger]] = set()

    @abstractmethod
    def _open_run(self) -> Any | None:
        """The client's run that this logger holds and has not ended, or None (without starting one)."""

    @abstractmethod
    def _flush_run(self, run: Any, status: str) -> None:
        """Write out what was logged to ``run``, at the end of a successful stage (the run goes on)."""

    @abstractmethod
    def _end_run(self, run: Any, status: str) -> None:
        """End ``run`` (``status``: ``"success"``, ``"failed"``, ...) and forget it: a later use starts a new one."""

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """The end of a Trainer stage: flush the run and keep it open when ``status`` is ``"success"`` (the
        pipeline's next stage logs into it), end it otherwise."""
        run = self._open_run()
        if run is None:
            return
        if status == "success":
            self._flush_run(run, status)
            ClientRunLogger._left_open.add(self)
        else:
            self.close(status)

    @rank_zero_only
    def close(self, status: str = "success") -> None:
        """End the run, recording ``status``; a later use of the logger starts a new run."""
        ClientRunLogger._left_open.discard(self)
        run = self._open_run()
        if run is not None:
            self._end_run(run, status)


def end_open_runs() -> None:
    """End every run that a pipeline logger of this process left open after a successful stage (what the next
    pipeline's logger does before it starts its run, and the end of the process)."""
    for logger in list(ClientRunLogger._left_open):
        logger.close()


__all__ = ["ClientRunLogger", "end_open_runs"]
