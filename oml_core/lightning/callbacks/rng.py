"""``RNGStateCallback``: the random state of a run is part of its checkpoints, so a resumed run goes on exactly
as the uninterrupted one would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytorch_lightning as pl
import torch

from oml_core.ddp.utils import get_rank_safe, get_world_size_safe, sync_dicts_ddp
from oml_core.utils.rng_state import get_rng_state, set_rng_state

if TYPE_CHECKING:
    from oml_core.lightning.resumable import ResumableBatchSampler

#: The checkpoint entry of the position of a training epoch that was saved in its middle.
MID_EPOCH_KEY = "oml_mid_epoch_loader"


class RNGStateCallback(pl.Callback):
    """Puts the random state into every checkpoint and restores it when training resumes from one.

    The state (see :func:`get_rng_state`) is that of python's, numpy's and torch's global generators and of the
    run's own ``generators`` (e.g. the sampler's), taken when the checkpoint is written, i.e. after the
    epoch's validation: nothing random happens between then and the next epoch. In DDP every process's state
    is gathered into the checkpoint (:func:`~oml_core.ddp.utils.sync_dicts_ddp`) and every process gets its
    own back (process 0's when the number of processes has changed).

    A checkpoint written in the middle of an epoch (a step checkpoint, an interrupt) also holds the position
    of the training loader's ``resumable`` sampler (:data:`MID_EPOCH_KEY`, see
    :class:`~oml_core.lightning.resumable.ResumableBatchSampler`): resuming from it goes on with the rest of
    that epoch, batch for batch and augmentation for augmentation (``num_workers=0``), as if never stopped.

    With ``restore`` false (a run resumed with another seed) nothing random is restored: the random state is
    the one the new seed gave, and an epoch resumed in the middle draws its order anew and skips as many
    batches as were done.

    Args:
        generators: The generators to save and restore besides the global ones, by name.
        resumable: The training loader's batch sampler, when mid-epoch checkpoints are to be resumable.
        restore: Whether a resumed run takes the random state of its checkpoint.
    """

    def __init__(
        self,
        generators: Mapping[str, torch.Generator] | None = None,
        resumable: ResumableBatchSampler | None = None,
        restore: bool = True,
    ) -> None:
        super().__init__()
        self.generators = dict(generators or {})
        self.resumable = resumable
        self.restore = restore

    def state_dict(self) -> dict[str, Any]:
        """``{"per_process": [state of process 0, state of process 1, ...]}``."""
        return sync_dicts_ddp({"per_process": [get_rng_state(self.generators)]}, get_world_size_safe())

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self.restore:
            return
        states = state_dict["per_process"]
        rank = get_rank_safe()
        set_rng_state(states[rank] if rank < len(states) else states[0], self.generators)

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        """Add the loader's position when the checkpoint is written before the epoch's last batch ended."""
        progress = trainer.fit_loop.epoch_loop.batch_progress
        if self.resumable is not None and not progress.is_last_batch and 0 < progress.current.ready:
            checkpoint[MID_EPOCH_KEY] = self.resumable.state_dict(batches_done=progress.current.ready)

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if self.resumable is not None and MID_EPOCH_KEY in checkpoint:
            position = checkpoint[MID_EPOCH_KEY]
            self.resumable.load_state_dict(
                position if self.restore else {"batches_done": position["batches_done"]}
            )


__all__ = ["MID_EPOCH_KEY", "RNGStateCallback"]
