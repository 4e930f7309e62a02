"""The pretrained zoo: checkpoints registered by plugins (``oml_register_pretrained``), downloaded once to a
cache, md5-checked (a cached file hashed once, its digests remembered in a sidecar), converted to the
extractors' format. See :mod:`oml_core.zoo.store`."""

from oml_core.zoo.entry import IMREADERS, PretrainedModel
from oml_core.zoo.store import (
    PretrainedChecksumError,
    PretrainedDownloadError,
    check_cached_checkpoint,
    download_checkpoint,
    get_pretrained,
    get_transforms_for_pretrained,
    load_pretrained_state_dict,
    pretrained_checkpoint,
    pretrained_keys,
    weights_cache_dir,
)
from oml_core.zoo.weights import load_weights

__all__ = [
    "IMREADERS",
    "PretrainedChecksumError",
    "PretrainedDownloadError",
    "PretrainedModel",
    "check_cached_checkpoint",
    "download_checkpoint",
    "get_pretrained",
    "get_transforms_for_pretrained",
    "load_pretrained_state_dict",
    "load_weights",
    "pretrained_checkpoint",
    "pretrained_keys",
    "weights_cache_dir",
]
