"""The DDP strategy of oml's pipelines: Lightning's, with the process group destroyed before the interpreter
exits, whatever the backend.

Lightning destroys the process group at exit for NCCL only. A gloo group left alive (the CPU backend) is
torn down during interpreter finalisation, when gloo's worker threads may still hold work objects; the process
then aborts now and then (``terminate called without an active exception``, exit status -6) after the run has
finished and written everything. An ``atexit`` handler runs while the interpreter is whole, so the group is
destroyed there.
"""

from __future__ import annotations

import atexit

import torch.distributed as dist
from pytorch_lightning.strategies import DDPStrategy


def destroy_process_group_if_initialized() -> None:
    """Destroy the default process group if one is initialised (a no-op otherwise, so it may run twice)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class DDPStrategyClosedAtExit(DDPStrategy):
    """``DDPStrategy`` whose process group is destroyed by :func:`destroy_process_group_if_initialized` at
    interpreter exit (registered once per process, when the group is set up). The group stays usable until then,
    so a caller may still gather results across the processes after ``trainer.fit`` returns."""

    def setup_distributed(self) -> None:
        super().setup_distributed()
        atexit.unregister(destroy_process_group_if_initialized)  # once, however many trainers a process runs
        atexit.register(destroy_process_group_if_initialized)


__all__ = ["DDPStrategyClosedAtExit", "destroy_process_group_if_initialized"]
