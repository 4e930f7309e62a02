"""Loading local checkpoints into models: plain state dicts, Lightning checkpoints, wrapped keys.

Checkpoints are always read with ``torch.load(path, map_location="cpu", weights_only=True)``: a file that
holds arbitrary pickled objects is refused rather than executed. A file that oml wrote is read only once its
digest is checked (:func:`~oml_core.utils.digest.verify_checkpoint`): a damaged ``best.ckpt`` is refused, never
loaded into a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

from oml_core.utils.digest import CorruptCheckpointError, verify_checkpoint
from oml_core.utils.files import not_a_file
from oml_core.utils.misc_torch import first_non_finite

#: Prefixes that wrappers add to the keys of a model's state dict: a Lightning module's ``model.``,
#: an ``extractor.`` attribute of a meta-model, DDP's / DataParallel's ``module.``.
WRAPPER_PREFIXES: tuple[str, ...] = ("model.", "extractor.", "module.")

_MAX_KEYS_SHOWN = 10


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit the model; the message names the file."""


#: How the files ``torch.save`` writes begin: a zip archive (since torch 1.6) or a pickle of protocol 2 to 5.
_TORCH_FILE_STARTS = (b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
_SHOWN_BYTES = 24


def torch_file_problem(path: Path) -> str | None:
    """None when the file ``path`` begins as the files of ``torch.save`` do (a zip archive, a pickle), else why
    it is not a checkpoint, to follow its path in a message: ``"is empty"`` or ``"is not a checkpoint written by
    torch.save (neither a zip archive nor a pickle): it begins with b'hello'"``, so that a text file is not
    reported as torch's ``KeyError: 101``.

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as file:
        head = file.read(_SHOWN_BYTES)
    if not head:
        return "is empty (0 bytes), not a checkpoint"
    if head.startswith(_TORCH_FILE_STARTS):
        return None
    return f"is not a checkpoint written by torch.save (neither a zip archive nor a pickle): it begins with {head!r}"


def read_state_dict(path: str | Path) -> dict[str, Tensor]:
    """Read the state dict stored in the local file ``path``.

    A ``.safetensors`` file is read with the safetensors library. Any other file is read with
    ``torch.load(weights_only=True)``, after its digest is checked when oml wrote it
    (:func:`~oml_core.utils.digest.verify_checkpoint`): a Lightning checkpoint (a dict with a ``"state_dict"``
    entry) is unwrapped to its ``state_dict``; else the file must hold a ``{str: Tensor}`` mapping itself.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        CheckpointError: ``path`` is no file (a symbolic link loop, a directory:
            :func:`~oml_core.utils.files.not_a_file`); the file is not one ``torch.save`` writes
            (:func:`torch_file_problem`: a text file ...); it is corrupt (its sha256 is not the one written with
            it: "... is corrupt: its sha256 ... differs from the one written with it"), cannot be loaded with
            ``weights_only=True`` or holds no state dict.
    """
    path = Path(path)
    problem = not_a_file(path)
    if problem == "does not exist":
        raise FileNotFoundError(f"Checkpoint file not found: {str(path)!r}")
    if problem is not None:
        raise CheckpointError(f"the checkpoint {str(path)!r} {problem}")
    if path.suffix == ".safetensors":
        return _read_safetensors(path)
    try:
        verify_checkpoint(path)
    except CorruptCheckpointError as e:
        raise CheckpointError(str(e)) from e
    problem = torch_file_problem(path)
    if problem is not None:
        raise CheckpointError(f"{str(path)!r} {problem}")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise CheckpointError(
            f"Cannot load the checkpoint {str(path)!r} with torch.load(weights_only=True): "
            f"{type(e).__name__}: {e}"
        ) from e
    if isinstance(obj, Mapping) and isinstance(obj.get("state_dict"), Mapping):
        obj = obj["state_dict"]
    if not isinstance(obj, Mapping) or not all(isinstance(k, str) for k in obj):
        raise CheckpointError(
            f"The checkpoint {str(path)!r} holds a {type(obj).__name__}, not a state dict "
            f"(a mapping of parameter names to tensors, or a Lightning checkpoint with 'state_dict')"
        )
    return dict(obj)


def _read_safetensors(path: Path) -> dict[str, Tensor]:
    """The tensors of a ``.safetensors`` file (a format that holds tensors only, never code)."""
    try:
        from safetensors.torch import load_file
    except ImportError as e:
        raise CheckpointError(
            f"Reading {str(path)!r} needs the package safetensors: pip install safetensors"
        ) from e
    try:
        return dict(load_file(str(path), device="cpu"))
    except Exception as e:  # the library's own errors for a corrupt or truncated file
        raise CheckpointError(
            f"Cannot read the safetensors file {str(path)!r}: {type(e).__name__}: {e}"
        ) from e


def strip_prefixes(
    state_dict: Mapping[str, Tensor], prefixes: Iterable[str] = WRAPPER_PREFIXES
) -> dict[str, Tensor]:
    """Remove the leading ``prefixes`` from every key, repeatedly: ``model.model.fc.bias`` -> ``fc.bias``.

    Only use it for a target module whose own keys never start with one of ``prefixes``.
    """
    prefixes = tuple(prefixes)
    stripped: dict[str, Tensor] = {}
    for key, value in state_dict.items():
        new_key = key
        while True:
            prefix = next((p for p in prefixes if new_key.startswith(p)), None)
            if prefix is None:
                break
            new_key = new_key[len(prefix) :]
        stripped[new_key] = value
    return stripped


def drop_keys(state_dict: Mapping[str, Tensor], prefixes: Iterable[str]) -> dict[str, Tensor]:
    """Return ``state_dict`` without the keys that start with any of ``prefixes``."""
    prefixes = tuple(prefixes)
    return {k: v for k, v in state_dict.items() if not (prefixes and k.startswith(prefixes))}


def _show(keys: list[str]) -> str:
    shown = ", ".join(keys[:_MAX_KEYS_SHOWN])
    more = len(keys) - _MAX_KEYS_SHOWN
    return f"{shown}, ... ({more} more)" if more > 0 else shown


def load_state_dict_strict(module: nn.Module, state_dict: Mapping[str, Tensor], source: str | Path) -> None:
    """Load ``state_dict`` into ``module``, every key matched in name and shape.

    Raises:
        CheckpointError: missing or unexpected keys, or a shape mismatch; the message names ``source`` (the
            file), the missing and the unexpected keys (up to 10 of each, with a count of the rest).
    """
    expected = module.state_dict()
    missing = [k for k in expected if k not in state_dict]
    unexpected = [k for k in state_dict if k not in expected]
    if missing or unexpected:
        parts = [f"The checkpoint {str(source)!r} does not match {type(module).__name__}:"]
        if missing:
            parts.append(f"missing keys ({len(missing)}): {_show(missing)};")
        if unexpected:
            parts.append(f"unexpected keys ({len(unexpected)}): {_show(unexpected)};")
        parts.append("check that it was saved from the same architecture and arguments.")
        raise CheckpointError(" ".join(parts))
    mismatched = [
        f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(expected[k].shape)}"
        for k, v in state_dict.items()
        if isinstance(v, Tensor) and v.shape != expected[k].shape
    ]
    if mismatched:
        raise CheckpointError(
            f"The checkpoint {str(source)!r} does not match {type(module).__name__}: shape mismatch in "
            f"{len(mismatched)} tensor(s): {_show(mismatched)}"
        )
    module.load_state_dict(dict(state_dict), strict=True)


def load_checkpoint(
    module: nn.Module,
    path: str | Path,
    *,
    prefixes: Iterable[str] = WRAPPER_PREFIXES,
    ignore: Iterable[str] = (),
) -> None:
    """Load the local checkpoint ``path`` into ``module`` strictly.

    Steps: :func:`read_state_dict` (Lightning checkpoints unwrapped), :func:`strip_prefixes` with
    ``prefixes``, :func:`drop_keys` of ``ignore`` (key prefixes, after stripping), the values checked finite
    (a checkpoint saved by a run that diverged is refused before ``module`` changes) and
    :func:`load_state_dict_strict`.

    Raises:
        FileNotFoundError: no such file.
        CheckpointError: unreadable file, a tensor with a NaN or infinite value (the message names the file and
            the first such tensor), or keys/shapes that do not match ``module``.
    """
    state_dict = drop_keys(strip_prefixes(read_state_dict(path), prefixes), ignore)
    not_finite = first_non_finite(state_dict.items())
    if not_finite is not None:
        raise CheckpointError(
            f"the checkpoint {str(path)!r} has NaN or infinite values, first in the tensor {not_finite!r} (saved "
            f"by a run that diverged?); give weights whose values are all finite"
        )
    load_state_dict_strict(module, state_dict, path)


__all__ = [
    "WRAPPER_PREFIXES",
    "CheckpointError",
    "drop_keys",
    "load_checkpoint",
    "load_state_dict_strict",
    "read_state_dict",
    "strip_prefixes",
    "torch_file_problem",
]
