"""``ModuleDDP``: a LightningModule that serves its own loaders, patched for DDP in every process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytorch_lightning as pl
from torch.utils.data import DataLoader

from oml_core.ddp.patching import patch_dataloader_to_ddp

TLoaders = DataLoader | Sequence[DataLoader] | Mapping[str, DataLoader]


def patch_loaders(loaders: TLoaders) -> TLoaders:
    """:func:`~oml_core.ddp.patching.patch_dataloader_to_ddp` applied to one loader, a sequence or a dict."""
    if isinstance(loaders, DataLoader):
        return patch_dataloader_to_ddp(loaders)
    if isinstance(loaders, Mapping):
        return {key: patch_dataloader_to_ddp(loader) for key, loader in loaders.items()}
    return [patch_dataloader_to_ddp(loader) for loader in loaders]


class ModuleDDP(pl.LightningModule):
    """The module automatically patches training, validation and prediction dataloaders to DDP mode by
    splitting their batches between the processes (:class:`~oml_core.ddp.patching.DDPSamplerWrapper`).

    The loaders are re-created in every process by :meth:`train_dataloader`, :meth:`val_dataloader` and
    :meth:`predict_dataloader`, once the process group exists. Note, don't pass loaders to ``trainer.fit(...)``,
    ``trainer.validate(...)`` or ``trainer.predict(...)``, because in this case, PyTorch Lightning will ignore
    our patching; and build the trainer with ``use_distributed_sampler=False``.

    A batch that does not split evenly is padded with its first items, so some items are seen by two
    processes; whoever gathers the outputs keeps one of each by dataset index.

    Args:
        loaders_train: The training loader(s).
        loaders_val: The validation loader(s).
        loaders_predict: The prediction loader(s).
    """

    def __init__(
        self,
        loaders_train: TLoaders | None = None,
        loaders_val: TLoaders | None = None,
        loaders_predict: TLoaders | None = None,
    ) -> None:
        super().__init__()
        self.set_loaders(loaders_train, loaders_val, loaders_predict)

    def set_loaders(
        self,
        loaders_train: TLoaders | None = None,
        loaders_val: TLoaders | None = None,
        loaders_predict: TLoaders | None = None,
    ) -> None:
        """Keep the loaders the module serves (for a subclass whose other base initialises the module)."""
        self.loaders_train = loaders_train
        self.loaders_val = loaders_val
        self.loaders_predict = loaders_predict

    def train_dataloader(self) -> TLoaders:
        """The training loaders, patched to DDP."""
        if self.loaders_train is None:
            raise RuntimeError(
                f"{type(self).__name__} was built without loaders_train, so it cannot be trained"
            )
        return patch_loaders(self.loaders_train)

    def val_dataloader(self) -> TLoaders:
        """The validation loaders, patched to DDP (an empty list when there are none)."""
        return [] if self.loaders_val is None else patch_loaders(self.loaders_val)

    def predict_dataloader(self) -> TLoaders:
        """The prediction loaders, patched to DDP (an empty list when there are none)."""
        return [] if self.loaders_predict is None else patch_loaders(self.loaders_predict)


__all__ = ["ModuleDDP", "TLoaders", "patch_loaders"]
