"""The files of an export folder and its manifest ``export.json``, written by ``oml export`` and read by the
``onnx`` extractor and the serving plugin (:func:`read_export_manifest`).

An export is a folder::

    model.onnx     the graph: inputs named as in the manifest, dynamic batch axis, output ``embeddings``
    export.json    the manifest (:class:`ExportManifest`)
    tokenizer/     what the preprocessing names beside the graph (texts: the tokenizer, ``save_pretrained``)

``export.json``::

    {"format": "oml-onnx-export", "version": 1, "oml_core": "<version>", "torch": "<version>", "opset": 20,
     "model": "model.onnx", "model_sha256": "<sha256 of model.onnx>",
     "source": {"kind": "checkpoint" | "index" | "zoo", "name": "<path or key>"},
     "extractor": {name, args},          # the extractor spec of the source
     "weights_sha256": "<hex>" | null,   # the checkpoint file's; the index's weights_sha256; the zoo's
     "state_dict_sha256": "<hex>",       # the exported extractor's tensors (io.provenance.state_dict_sha256),
                                         # whatever file held them: the same for a checkpoint and its index
     "dataset": {name, args} | null,     # the source's dataset component (null: images)
     "feat_dim": 512,
     "inputs": [{"name": "images", "dtype": "float32", "shape": ["batch", 3, 224, 224]}],
     "output": {"name": "embeddings", "dtype": "float32", "shape": ["batch", 512]},
     "preprocessing": {...},             # what a caller does to raw data (image size, mean, std; tokenizer ...)
     "padding": {"sequence": "attention_mask"},  # trailing positions of an axis that are padding where the mask is 0
     "parity": {"tolerance": 1e-4, "max_relative_l2": ..., "probes": [...]}}
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oml_core.export.errors import ExportError
from oml_core.utils.atomic import atomic_write_bytes
from oml_core.utils.documents import checked_header

MODEL_FILE = "model.onnx"
MANIFEST_FILE = "export.json"
EXPORT_FORMAT = "oml-onnx-export"
#: The version of the layout this code writes and reads.
EXPORT_VERSION = 1
#: The dtypes an input of an export may have (those the extractors' graphs take).
INPUT_DTYPES = ("float32", "int64")
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: The backslashes before a quote or at the end of a string, and the quote (group 2: empty at the end).
_BEFORE_QUOTE = re.compile(r"(\\*)('|$)")
#: A string that hydra reads as that string unquoted (a name, a path), unless it is one of :data:`_WORDS`.
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_/.+@%-]*")
_WORDS = frozenset({"true", "false", "null", "inf", "nan"})


@dataclass(frozen=True)
class ExportInput:
    """One input of an exported graph: its name, dtype (:data:`INPUT_DTYPES`) and shape (an axis that varies by
    its name: ``"batch"``, ``"sequence"``)."""

    name: str
    dtype: str
    shape: tuple[int | str, ...]


@dataclass(frozen=True)
class ExportManifest:
    """The parsed ``export.json`` of an export folder.

    Attributes:
        folder: The export folder.
        data: The manifest's JSON, whole (see the module).
        inputs: The graph's inputs, in order.
        feat_dim: The size of the embeddings.
        weights_sha256: The sha256 of the weights the export came from (None: unknown).
        padding: ``{axis name: mask input}`` (see :attr:`~oml_core.interfaces.export.ExportSignature.padding`).
        state_dict_sha256: The digest of the exported extractor's tensors
            (:func:`~oml_core.io.provenance.state_dict_sha256`; None: an export of before it was recorded).
    """

    folder: Path
    data: Mapping[str, Any]
    inputs: tuple[ExportInput, ...]
    feat_dim: int
    weights_sha256: str | None
    padding: Mapping[str, str]
    state_dict_sha256: str | None = None

    @property
    def model_path(self) -> Path:
        """The graph's file."""
        return self.folder / MODEL_FILE

    @property
    def preprocessing(self) -> Mapping[str, Any]:
        """What a caller does to raw data to make the inputs."""
        return self.data["preprocessing"]

    def validate_overrides(self, folder: str) -> list[str]:
        """The overrides of ``oml validate`` that run this export on the data its source read: the ``onnx``
        extractor at ``folder`` (as the caller names it), the source's dataset component when it is not the
        images' (``dataset={name: texts, args: {...}}``) and its image transforms (``transforms_val={...}``).
        """
        overrides = ["extractor@extractor=onnx", f"extractor.args.path={folder}"]
        dataset = self.data.get("dataset")
        if isinstance(dataset, Mapping) and dataset.get("name") not in (None, "images"):
            overrides.append(f"dataset={hydra_value(dataset)}")
        transforms = self.preprocessing.get("transforms")
        if isinstance(transforms, Mapping):
            overrides.append(f"transforms_val={hydra_value(transforms)}")
        return overrides


def hydra_value(value: Any) -> str:
    """``value`` (JSON values; the keys of mappings plain names) written as the value of a hydra override:
    ``{name: texts, args: {tokenizer: /a/b, max_length: 128}}``; a string other than a plain name or path quoted,
    its quotes and the backslashes before a quote or at its end escaped (hydra unescapes those only)."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}: {hydra_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(hydra_value(item) for item in value) + "]"
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and value.lower() not in _WORDS:
            return value
        return "'" + _BEFORE_QUOTE.sub(lambda m: m[1] * 2 + ("\\'" if m[2] else ""), value) + "'"
    return json.dumps(value)  # true, false, null, numbers


def write_manifest(folder: Path, data: Mapping[str, Any]) -> None:
    """``data`` as ``folder/export.json``, written atomically (no NaN or infinity)."""
    atomic_write_bytes(folder / MANIFEST_FILE, json.dumps(data, indent=1, allow_nan=False).encode("utf-8"))


def read_export_manifest(folder: str | Path) -> ExportManifest:
    """The manifest of the export ``folder``, checked: its format and version, its inputs, ``feat_dim``,
    ``weights_sha256`` and the graph's file.

    Raises:
        ExportError: no such folder, no or unreadable ``export.json``, another format or version, a field of
            the wrong type, no ``model.onnx`` (each naming the file).
    """
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    if not folder.is_dir():
        raise ExportError(f"{folder}: no such export folder (oml export SOURCE --output DIR writes one)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ExportError(f"{path}: no such file; {folder} is not an ONNX export of oml export") from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExportError(f"{path}: not a readable export manifest ({type(e).__name__}: {e})") from e
    data = checked_header(
        data, path, EXPORT_FORMAT, EXPORT_VERSION, "the manifest of an oml export", "an export", ExportError
    )
    inputs = _inputs(data.get("inputs"), path)
    feat_dim = data.get("feat_dim")
    if not isinstance(feat_dim, int) or isinstance(feat_dim, bool) or feat_dim < 1:
        raise ExportError(f"{path}: feat_dim must be a positive int, got {feat_dim!r}")
    sha256 = data.get("weights_sha256")
    if sha256 is not None and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
        raise ExportError(f"{path}: weights_sha256 must be null or a sha256 hex digest, got {sha256!r}")
    tensors_sha256 = data.get("state_dict_sha256")
    if tensors_sha256 is not None and not (
        isinstance(tensors_sha256, str) and _SHA256.fullmatch(tensors_sha256)
    ):
        raise ExportError(
            f"{path}: state_dict_sha256 must be null or a sha256 hex digest, got {tensors_sha256!r}"
        )
    if not isinstance(data.get("preprocessing"), dict):
        raise ExportError(f"{path}: preprocessing must be an object")
    padding = _padding(data.get("padding", {}), inputs, path)
    if not (folder / MODEL_FILE).is_file():
        raise ExportError(f"{folder / MODEL_FILE}: no such file; the export {folder} is incomplete")
    return ExportManifest(folder, data, inputs, feat_dim, sha256, padding, tensors_sha256)


def _padding(value: Any, inputs: tuple[ExportInput, ...], path: Path) -> dict[str, str]:
    """``{axis name: mask input}``, each axis an axis of its mask input."""
    masks = {item.name: item for item in inputs}
    if not isinstance(value, dict) or not all(
        isinstance(axis, str) and mask in masks and axis in masks[mask].shape for axis, mask in value.items()
    ):
        raise ExportError(f"{path}: padding must map an axis name to an input of that axis, got {value!r}")
    return dict(value)


def _inputs(value: Any, path: Path) -> tuple[ExportInput, ...]:
    if not isinstance(value, list) or not value:
        raise ExportError(f"{path}: inputs must be a non-empty list of {{name, dtype, shape}}")
    inputs = []
    for position, item in enumerate(value):
        ok = (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and item.get("dtype") in INPUT_DTYPES
            and isinstance(item.get("shape"), list)
            and all(isinstance(axis, (int, str)) for axis in item["shape"])
        )
        if not ok:
            raise ExportError(
                f"{path}: inputs[{position}] must be {{name, dtype ({' or '.join(INPUT_DTYPES)}), shape}}, got "
                f"{item!r}"
            )
        inputs.append(ExportInput(item["name"], item["dtype"], tuple(item["shape"])))
    return tuple(inputs)


__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "INPUT_DTYPES",
    "MANIFEST_FILE",
    "MODEL_FILE",
    "ExportInput",
    "ExportManifest",
    "read_export_manifest",
    "write_manifest",
]
