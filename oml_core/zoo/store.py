"""The pretrained zoo's download store: looking checkpoints up in the registry, downloading them once into the
weights folder of the cache (:func:`~oml_core.caches.folder.weights_cache_dir`), checking and reading them.

Offline first: a checkpoint in the cache is used without any network access. A download happens only when
a zoo key is asked for and its file is missing; it is written to a temporary file, checked against the md5 of
the zoo, then renamed into place (an interrupted download leaves nothing half-written behind). Without a
network, the error says which url to fetch and where to put the file, within ``timeout`` seconds; with
``HF_HUB_OFFLINE=1`` or ``OML_OFFLINE=1`` it says so at once.

A file already in the cache (downloaded earlier, or put there by hand) is checked against the zoo's md5 and
sha256 too, but hashed once only: its digests are remembered in a sidecar file next to it while it is
unchanged (:func:`~oml_core.caches.digests.cached_file_digests`). A file whose digest differs from the zoo's is
refused with a :class:`PretrainedChecksumError` naming the file, both digests and what to do.
``OML_SKIP_WEIGHTS_CHECK=1`` turns the check of cached files off (a file of one's own under a zoo key's name,
tests with fake weights).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oml_core.caches.digests import cached_file_digests, file_digests, remember_digests
from oml_core.caches.folder import weights_cache_dir
from oml_core.utils.imports import resolve
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
#: Environment variable that turns off the digest check of the files already in the cache (``1``, ``true``,
#: ``yes``); downloads are always checked.
SKIP_CHECK_VARIABLE = "OML_SKIP_WEIGHTS_CHECK"
#: Bytes copied at a time from a download into its file.
_CHUNK = 1 << 20


class PretrainedDownloadError(RuntimeError):
    """A checkpoint could not be downloaded; the message names the url and where to put the file."""


class PretrainedChecksumError(PretrainedDownloadError):
    """A checkpoint in the weights cache is not the zoo's file (another md5 or sha256); the message names the
    file, the expected and the actual digest, and says to delete the file (it is then downloaded again) or to
    put the right file there."""


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


def _skip_check() -> bool:
    return os.environ.get(SKIP_CHECK_VARIABLE, "").lower() in ("1", "true", "yes")


def check_cached_checkpoint(
    path: Path, md5: str | None = None, sha256: str | None = None, url: str | None = None
) -> Path:
    """Check the file ``path`` of the weights cache against ``md5`` and ``sha256`` (digests, or their first
    characters; ``None``: not checked), hashing it only when it is new or changed
    (:func:`~oml_core.caches.digests.cached_file_digests`).

    Nothing is checked when both digests are ``None`` or ``OML_SKIP_WEIGHTS_CHECK`` is set.

    Returns:
        ``path``.

    Raises:
        PretrainedChecksumError: a digest differs; the message names the file, the expected and the actual
            digest, and says to delete the file so that it is downloaded again (from ``url``), or to put the
            right file there.
    """
    expected = {name: digest for name, digest in (("md5", md5), ("sha256", sha256)) if digest is not None}
    if not expected or _skip_check():
        return path
    found = cached_file_digests(path)
    for name, digest in expected.items():
        if not found[name].startswith(digest):
            source = f" from {url}" if url else ""
            raise PretrainedChecksumError(
                f"the cached checkpoint {path} has {name} {found[name]}, expected {digest}: it is corrupt, "
                f"incomplete or another file; delete it to download it again{source}, or put the right file "
                f"there ({SKIP_CHECK_VARIABLE}=1 uses it unchecked)"
            )
    return path


def download_checkpoint(
    url: str,
    path: Path,
    md5: str | None = None,
    timeout: float = DOWNLOAD_TIMEOUT,
    sha256: str | None = None,
) -> Path:
    """Download ``url`` to ``path`` (through a temporary file in its folder), checking ``md5`` and ``sha256``
    (digests, or their first characters) when given. The digests of a checked file are remembered in its
    sidecar (:func:`~oml_core.caches.digests.digests_sidecar`), so that its next use does not hash it again.

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
    if found:
        remember_digests(path, found)
    return path


def pretrained_checkpoint(key: str, registry: Registry | None = None) -> Path:
    """The local file of the zoo checkpoint ``key``: from the cache, or downloaded there first.

    A file already in the cache is used without network access (put a checkpoint there by hand to work
    offline); a downloaded one and a cached one are both checked against the zoo's md5 and sha256, a cached
    one hashed only once as long as it does not change (:func:`check_cached_checkpoint`).

    Raises:
        UnknownNameError: ``key`` is not in the zoo.
        PretrainedChecksumError: the cached file is not the zoo's (see :func:`check_cached_checkpoint`).
        PretrainedDownloadError: the file is missing and cannot be downloaded (see :func:`download_checkpoint`).
    """
    model = get_pretrained(key, registry)
    path = weights_cache_dir() / model.filename
    if path.is_file():
        return check_cached_checkpoint(path, md5=model.md5, sha256=model.sha256, url=model.url)
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
    weights: str, registry: Registry | None = None
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(transform, imread)`` of the zoo checkpoint ``weights`` (OML's parameter name): the registered transforms
    it was trained with (built from the entry's ``{name, args}``) and the function reading an image file for it.

    Raises:
        UnknownNameError: ``weights`` is not in the zoo, or its transforms are not registered.
        ValueError: the checkpoint takes no transforms (its entry's ``transforms`` is ``None``).
    """
    registry = registry_or_default(registry)
    model = get_pretrained(weights, registry)
    if model.transforms is None:
        raise ValueError(f"the pretrained checkpoint {weights!r} takes no image transforms")
    transform = registry.build("transforms", dict(model.transforms))
    return transform, resolve(IMREADERS[model.imread])


__all__ = [
    "DOWNLOAD_TIMEOUT",
    "PretrainedChecksumError",
    "SKIP_CHECK_VARIABLE",
    "check_cached_checkpoint",
    "registry_or_default",
    "OFFLINE_VARIABLES",
    "PRETRAINED_KIND",
    "PretrainedDownloadError",
    "download_checkpoint",
    "get_pretrained",
    "get_transforms_for_pretrained",
    "is_offline",
    "load_pretrained_state_dict",
    "pretrained_checkpoint",
    "pretrained_keys",
]
