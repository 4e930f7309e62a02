"""The pretrained zoo: looking checkpoints up in the registry, downloading them once to a cache, reading them.

Offline first: a checkpoint in the cache is used without any network access. A download happens only when
a zoo key is asked for and its file is missing; it is written to a temporary file, checked against the md5 of
the zoo, then renamed into place (an interrupted download leaves nothing half-written behind). Without a
network, the error says which url to fetch and where to put the file, within ``timeout`` seconds; with
``HF_HUB_OFFLINE=1`` or ``OML_OFFLINE=1`` it says so at once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oml_core.utils.cache import get_cache_dir
from oml_core.zoo.entry import IMREADERS, PretrainedModel

if TYPE_CHECKING:
    from torch import Tensor

    from oml_core.registry import Registry

#: Kind of the zoo's registry entries.
PRETRAINED_KIND = "pretrained"
#: Seconds a download may wait for the server before giving up (connection and every read).
DOWNLOAD_TIMEOUT = 20.0
#: Environment variables that forbid any download (``1``, ``true`` or ``yes``).
OFFLINE_VARIABLES = ("OML_OFFLINE", "HF_HUB_OFFLINE")
_CHUNK = 1 << 20


class PretrainedDownloadError(RuntimeError):
    """A checkpoint could not be downloaded; the message names the url and where to put the file."""


def weights_cache_dir() -> Path:
    """Where zoo checkpoints are kept: ``$OML_WEIGHTS_DIR`` if set, else ``<oml cache dir>/weights``
    (:func:`~oml_core.utils.cache.get_cache_dir`)."""
    if os.environ.get("OML_WEIGHTS_DIR"):
        return Path(os.environ["OML_WEIGHTS_DIR"]).expanduser()
    return get_cache_dir() / "weights"


def registry_or_default(registry: Registry | None) -> Registry:
    """``registry``, or ``default_registry()`` when it is ``None``."""
    if registry is None:
        from oml_core.registry import default_registry

        return default_registry()
    return registry


def get_pretrained(key: str, registry: Registry | None = None) -> PretrainedModel:
    """The metadata of the zoo checkpoint ``key`` (``default_registry()`` when ``registry`` is ``None``).

    Raises:
        UnknownNameError: no plugin registers ``key`` (the message lists close and known keys).
        TypeError: the registered factory does not build a :class:`PretrainedModel`.
    """
    entry = registry_or_default(registry).get(PRETRAINED_KIND, key)
    model = entry.load()()
    if not isinstance(model, PretrainedModel):
        raise TypeError(
            f"pretrained {key!r} of plugin {entry.plugin.provider} builds a {type(model).__name__}, "
            f"not a PretrainedModel"
        )
    return model


def pretrained_keys(extractor: str | None = None, registry: Registry | None = None) -> list[str]:
    """The zoo keys, sorted; only those of the extractor registered as ``extractor`` when given."""
    registry = registry_or_default(registry)
    keys = registry.names(PRETRAINED_KIND)
    if extractor is None:
        return keys
    return [key for key in keys if get_pretrained(key, registry).extractor == extractor]


def is_offline() -> bool:
    """Whether an environment variable of :data:`OFFLINE_VARIABLES` forbids downloads."""
    return any(os.environ.get(name, "").lower() in ("1", "true", "yes") for name in OFFLINE_VARIABLES)


def file_digests(path: Path) -> dict[str, str]:
    """``{"md5": ..., "sha256": ...}`` hex digests of the file ``path``, read once in chunks."""
    digests = {"md5": hashlib.md5(), "sha256": hashlib.sha256()}
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            for digest in digests.values():
                digest.update(chunk)
    return {name: digest.hexdigest() for name, digest in digests.items()}


def download_checkpoint(
    url: str,
    path: Path,
    md5: str | None = None,
    timeout: float = DOWNLOAD_TIMEOUT,
    sha256: str | None = None,
) -> Path:
    """Download ``url`` to ``path`` (through a temporary file in its folder), checking ``md5`` and ``sha256``
    (digests, or their first characters) when given.

    Raises:
        PretrainedDownloadError: downloads are forbidden (:func:`is_offline`), the server cannot be reached
            within ``timeout`` seconds, or the downloaded file has another digest (it is deleted). The message
            names the url and the path to put the file at by hand.
    """
    manual = f"download {url} yourself and put the file at {path}"
    if is_offline():
        names = " / ".join(OFFLINE_VARIABLES)
        raise PretrainedDownloadError(f"downloads are disabled ({names} is set): {manual}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    tmp = Path(tmp_name)
    expected = {name: digest for name, digest in (("md5", md5), ("sha256", sha256)) if digest is not None}
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            shutil.copyfileobj(response, out, _CHUNK)
        found = file_digests(tmp) if expected else {}
        for name, digest in expected.items():
            if not found[name].startswith(digest):
                raise PretrainedDownloadError(
                    f"the file downloaded from {url} has {name} {found[name]}, expected {digest}: the download "
                    f"is corrupt or the file changed upstream; retry, or {manual}"
                )
        tmp.replace(path)
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise PretrainedDownloadError(
            f"cannot download the checkpoint ({type(e).__name__}: {e}): {manual}"
        ) from e
    finally:
        tmp.unlink(missing_ok=True)
    return path


def pretrained_checkpoint(key: str, registry: Registry | None = None) -> Path:
    """The local file of the zoo checkpoint ``key``: from the cache, or downloaded there first.

    A file already in the cache is used as it is, without network access (put a checkpoint there by hand to
    work offline); a downloaded one is checked against the zoo's md5 and sha256.

    Raises:
        UnknownNameError: ``key`` is not in the zoo.
        PretrainedDownloadError: the file is missing and cannot be downloaded (see :func:`download_checkpoint`).
    """
    model = get_pretrained(key, registry)
    path = weights_cache_dir() / model.filename
    if path.is_file():
        return path
    return download_checkpoint(model.url, path, md5=model.md5, sha256=model.sha256)


def load_pretrained_state_dict(key: str, registry: Registry | None = None) -> dict[str, Tensor]:
    """The state dict of the zoo checkpoint ``key``, read with ``torch.load(weights_only=True)`` (a Lightning
    checkpoint is unwrapped to its ``state_dict``) and converted by the entry's ``converter``.

    Raises:
        UnknownNameError, PretrainedDownloadError: see :func:`pretrained_checkpoint`.
        CheckpointError: the file cannot be read as a state dict.
    """
    from oml_core.utils.checkpoints import read_state_dict

    model = get_pretrained(key, registry)
    state_dict = read_state_dict(pretrained_checkpoint(key, registry))
    converter = model.load_converter()
    return dict(converter(state_dict)) if converter is not None else state_dict


def get_transforms_for_pretrained(
    key: str, registry: Registry | None = None
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(transform, imread)`` of the zoo checkpoint ``key``: the registered transforms it was trained with
    (built from the entry's ``{name, args}``) and the function reading an image file for it.

    Raises:
        UnknownNameError: ``key`` is not in the zoo, or its transforms are not registered.
    """
    import importlib

    registry = registry_or_default(registry)
    model = get_pretrained(key, registry)
    transform = registry.build("transforms", dict(model.transforms))
    module, _, attr = IMREADERS[model.imread].partition(":")
    return transform, getattr(importlib.import_module(module), attr)


__all__ = [
    "DOWNLOAD_TIMEOUT",
    "registry_or_default",
    "OFFLINE_VARIABLES",
    "PRETRAINED_KIND",
    "PretrainedDownloadError",
    "download_checkpoint",
    "file_digests",
    "get_pretrained",
    "get_transforms_for_pretrained",
    "is_offline",
    "load_pretrained_state_dict",
    "pretrained_checkpoint",
    "pretrained_keys",
    "weights_cache_dir",
]
