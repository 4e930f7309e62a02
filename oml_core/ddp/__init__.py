"""DDP helpers: split a sampler's batches among the processes, gather python dicts across them, gather the
training batch of every process for the loss (cross-device negatives)."""

from oml_core.ddp.gather import gather_across_devices
from oml_core.ddp.patching import DDPSamplerWrapper, check_loaders_is_patched, patch_dataloader_to_ddp
from oml_core.ddp.utils import get_rank_safe, get_world_size_safe, is_ddp, merge_list_of_dicts, sync_dicts_ddp

__all__ = [
    "DDPSamplerWrapper",
    "check_loaders_is_patched",
    "gather_across_devices",
    "get_rank_safe",
    "get_world_size_safe",
    "is_ddp",
    "merge_list_of_dicts",
    "patch_dataloader_to_ddp",
    "sync_dicts_ddp",
]
