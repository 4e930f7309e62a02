"""Where a Hugging Face model or tokenizer is read from: a local folder, or the Hugging Face cache without any
network access; a download only when asked (``download: true``), as the image zoo downloads only a zoo key.

A name is a folder when it starts with ``/``, ``.`` or ``~`` or when such a folder exists; any other name is a
model of the Hugging Face hub (``sentence-transformers/all-MiniLM-L6-v2``), looked up in its cache
(``local_files_only=True``). Both are checked before any model is read, each failure a one-line
:class:`~oml_core.registry.ConfigError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from oml_core.registry import ConfigError


def is_folder_name(name: str) -> bool:
    """Whether ``name`` means a local folder (it starts with ``/``, ``.`` or ``~``, or exists) and not a model
    of the hub."""
    return name.startswith(("/", ".", "~")) or Path(name).expanduser().exists()


def resolve_model_folder(name: str, download: bool, owner: str) -> Path:
    """The local folder of the model ``name``: the folder itself, or its snapshot in the Hugging Face cache
    (downloaded there first when ``download`` is true and it is missing).

    Args:
        name: A local folder, or a model name of the Hugging Face hub.
        download: Whether a model missing from the cache may be downloaded.
        owner: Names the argument in the messages (``"hf_text: model"``).

    Raises:
        ConfigError: a folder that does not exist; a model that is not in the cache (and ``download`` is false,
            or the download failed).
    """
    if is_folder_name(name):
        folder = Path(name).expanduser()
        if not folder.is_dir():
            raise ConfigError(f"{owner}: the model folder {str(folder)!r} does not exist")
        return folder.resolve()
    from huggingface_hub import constants, snapshot_download

    try:
        return Path(snapshot_download(name, local_files_only=not download))
    except Exception as e:  # the hub's errors: not cached, offline, no such repository, no network
        if download:
            raise ConfigError(f"{owner}: cannot download {name!r} from the Hugging Face hub: {e}") from e
        raise ConfigError(
            f"{owner}: {name!r} is neither a folder nor a model in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}); give a local folder, or set download: true to download it"
        ) from e


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers without its progress bars (``Loading weights``) for the block: the library prints nothing."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def load_model(folder: Path) -> Any:
    """The transformer (``AutoModel``) of ``folder``, read from there only, in training mode (as a freshly built
    ``nn.Module``; transformers returns it in eval mode): inference switches it to eval mode itself."""
    from transformers import AutoModel

    with quiet_transformers():
        return AutoModel.from_pretrained(str(folder), local_files_only=True).train()


def load_tokenizer(name: str, download: bool = False, owner: str = "tokenizer") -> Any:
    """The tokenizer (``AutoTokenizer``) of the model ``name`` (see :func:`resolve_model_folder`).

    Raises:
        ConfigError: see :func:`resolve_model_folder`.
    """
    from transformers import AutoTokenizer

    folder = resolve_model_folder(name, download, owner)
    with quiet_transformers():
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


__all__ = ["is_folder_name", "load_model", "load_tokenizer", "quiet_transformers", "resolve_model_folder"]
