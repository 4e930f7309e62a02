"""The pretrained zoo: checkpoints registered by plugins (``oml_register_pretrained``), downloaded once to a
cache, md5-checked, converted to the extractors' format. See :mod:`oml_core.zoo.store`."""

from oml_core.zoo.entry import IMREADERS, PretrainedModel
from oml_core.zoo.store import (
    PretrainedDownloadError,
    download_checkpoint,
    get_pretrained,
    get_transforms_for_pretrained,
    load_pretrained_state_dict,
    pretrained_checkpoint,
    pretrained_keys,
    weights_cache_dir,
)

__all__ = [
    "IMREADERS",
    "PretrainedDownloadError",
    "PretrainedModel",
    "download_checkpoint",
    "get_pretrained",
    "get_transforms_for_pretrained",
    "load_pretrained_state_dict",
    "pretrained_checkpoint",
    "pretrained_keys",
    "weights_cache_dir",
]
