"""The text models of the zoo: a row per model, its Hugging Face name, the extractor's arguments and the sha256 of
its weights file (that of the hub), registered by :mod:`oml_texts.plugin` as ``pretrained`` rows of its table.

A text model is a folder (config, tokenizer, weights), not one checkpoint file: the ``hf_text`` extractor given a
zoo key as ``weights`` reads the model from its ``model`` folder, or from the Hugging Face cache under the row's
name (downloaded only with ``download: true``), and checks the row's :attr:`~PretrainedModel.filename` in that
folder against its digest (:func:`check_model_folder`) before reading it. The table imports no torch.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from oml_core.caches.digests import file_digests
from oml_core.zoo import PretrainedChecksumError, PretrainedModel

MINILM = "sentence-transformers/all-MiniLM-L6-v2"

#: Every text model of the zoo: ``{key: factory of its PretrainedModel}``; ``init_args["model"]`` is its name on
#: the Hugging Face hub, ``filename`` the file of its folder that ``sha256`` is the digest of.
PRETRAINED: dict[str, Callable[[], PretrainedModel]] = {
    "all_minilm_l6_v2": partial(
        PretrainedModel,
        extractor="hf_text",
        init_args={"model": MINILM, "pooling": "mean", "normalise_features": True},
        url=f"https://huggingface.co/{MINILM}/resolve/main/model.safetensors",
        md5=None,
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        filename="model.safetensors",
        transforms={},
        description="sentence-transformers all-MiniLM-L6-v2 (384-d, mean pooling, normalised)",
    ),
}


def check_model_folder(folder: Path, key: str, entry: PretrainedModel) -> None:
    """Check that ``folder`` holds the zoo model ``key``: its file ``entry.filename`` has ``entry``'s digests.

    Raises:
        PretrainedChecksumError: the file is missing or has another digest (the message names the file, both
            digests and the key).
    """
    path = folder / entry.filename
    if not path.is_file():
        raise PretrainedChecksumError(
            f"{folder}: has no {entry.filename}, the weights of the zoo model {key!r}"
        )
    found = file_digests(path)
    for name, digest in (("md5", entry.md5), ("sha256", entry.sha256)):
        if digest is not None and not found[name].startswith(digest):
            raise PretrainedChecksumError(
                f"{path} has {name} {found[name]}, expected {digest}: it is not the zoo model {key!r} ({entry.url})"
            )


__all__ = ["MINILM", "PRETRAINED", "check_model_folder"]
