"""The pretrained zoo: checkpoints registered by plugins (``oml_register_pretrained``), downloaded once to a
cache (:func:`~oml_core.caches.folder.weights_cache_dir`), md5-checked (a cached file hashed once, its digests
remembered in a sidecar: :mod:`oml_core.caches.digests`), converted to the extractors' format. See
:mod:`oml_core.zoo.store`. :func:`~oml_core.zoo.weights.load_weights` (the ``weights`` of an extractor) and
:class:`~oml_core.zoo.extractor.ZooExtractor` (the base of the extractors with checkpoints in the zoo) are
imported on first access: the zoo's paths are read without importing torch."""

from typing import TYPE_CHECKING

from oml_core.caches.folder import weights_cache_dir
from oml_core.utils.lazy import lazy_exports
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
)

if TYPE_CHECKING:
    from oml_core.zoo.extractor import ZooExtractor
    from oml_core.zoo.weights import load_weights

__all__ = [
    "IMREADERS",
    "PretrainedChecksumError",
    "PretrainedDownloadError",
    "PretrainedModel",
    "ZooExtractor",
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

__getattr__, __dir__ = lazy_exports(
    __name__, {"load_weights": "oml_core.zoo.weights", "ZooExtractor": "oml_core.zoo.extractor"}
)
