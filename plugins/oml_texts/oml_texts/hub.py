"""Where a Hugging Face model or tokenizer is read from: a local folder, or the Hugging Face cache without any
network access; a download only when asked (``download: true``), as the image zoo downloads only a zoo key.

A name is a folder when it starts with ``/``, ``.`` or ``~`` or when such a folder exists; any other name is a
model of the Hugging Face hub (``sentence-transformers/all-MiniLM-L6-v2``), looked up in its cache
(``local_files_only=True``). Both are checked before any model is read, and so is what the folder holds (a model:
``config.json`` and its weights; a tokenizer: its vocabulary files); each failure, and a folder that transformers
cannot read, is a one-line :class:`~oml_core.registry.ConfigError` naming the argument and the folder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from oml_core.registry import ConfigError
from oml_core.utils.text import one_line

#: The file of a model's configuration (its architecture) in a model folder.
CONFIG_FILE = "config.json"
#: The files of a model's weights in a model folder, one of which it holds (transformers' names: the weights, or
#: the index of their shards).
WEIGHTS_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
#: The files of a tokenizer, one of which its folder holds: its vocabulary (the file of a fast tokenizer, a
#: WordPiece, BPE or SentencePiece vocabulary) or the configuration that names it.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)


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


def check_model_files(folder: Path, owner: str) -> None:
    """Check that ``folder`` holds a model: its :data:`CONFIG_FILE` and one of :data:`WEIGHTS_FILES`.

    Raises:
        ConfigError: one of them is missing (``hf_text: model: '/data/photos' is not a model folder: it has no
            config.json``), naming ``owner`` (the argument), the folder and the file.
    """
    if not (folder / CONFIG_FILE).is_file():
        raise ConfigError(f"{owner}: {str(folder)!r} is not a model folder: it has no {CONFIG_FILE}")
    if not any((folder / name).is_file() for name in WEIGHTS_FILES):
        raise ConfigError(
            f"{owner}: {str(folder)!r} is not a model folder: it has no weights (none of "
            f"{', '.join(WEIGHTS_FILES)})"
        )


def check_tokenizer_files(folder: Path, owner: str) -> None:
    """Check that ``folder`` holds a tokenizer: one of :data:`TOKENIZER_FILES`.

    Raises:
        ConfigError: none of them is there, naming ``owner`` (the argument), the folder and the files.
    """
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ConfigError(
            f"{owner}: {str(folder)!r} holds no tokenizer: it has none of {', '.join(TOKENIZER_FILES)}"
        )


def load_model(folder: Path, owner: str = "model") -> Any:
    """The transformer (``AutoModel``) of ``folder``, read from there only, in training mode (as a freshly built
    ``nn.Module``; transformers returns it in eval mode): inference switches it to eval mode itself.

    Raises:
        ConfigError: ``folder`` is not a model folder (:func:`check_model_files`), or transformers cannot read it
            (a ``config.json`` that is no JSON or names no known architecture, weights that do not fit it); one line
            naming ``owner`` (the argument), the folder and transformers' reason.
    """
    from transformers import AutoModel

    check_model_files(folder, owner)
    try:
        with quiet_transformers():
            return AutoModel.from_pretrained(str(folder), local_files_only=True).train()
    except (OSError, ValueError) as e:  # transformers' errors of a folder it cannot read
        raise ConfigError(f"{owner}: cannot read the model in {str(folder)!r}: {one_line(e)}") from e


def load_tokenizer(name: str, download: bool = False, owner: str = "tokenizer") -> Any:
    """The tokenizer (``AutoTokenizer``) of the model ``name`` (see :func:`resolve_model_folder`).

    Raises:
        ConfigError: see :func:`resolve_model_folder`; a folder that holds no tokenizer
            (:func:`check_tokenizer_files`), or one that transformers cannot read (one line naming ``owner``, the
            folder and transformers' reason).
    """
    from transformers import AutoTokenizer

    folder = resolve_model_folder(name, download, owner)
    check_tokenizer_files(folder, owner)
    try:
        with quiet_transformers():
            return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as e:  # transformers' errors of a folder it cannot read
        raise ConfigError(f"{owner}: cannot read the tokenizer in {str(folder)!r}: {one_line(e)}") from e


__all__ = [
    "CONFIG_FILE",
    "TOKENIZER_FILES",
    "WEIGHTS_FILES",
    "check_model_files",
    "check_tokenizer_files",
    "is_folder_name",
    "load_model",
    "load_tokenizer",
    "quiet_transformers",
    "resolve_model_folder",
]
