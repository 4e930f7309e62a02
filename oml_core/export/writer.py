"""``export_onnx``: the model of a checkpoint, an index or a zoo key written to ONNX in a new folder, checked
against PyTorch before the folder appears (:mod:`oml_core.export.parity`).

Steps: the output folder is checked free and onnxruntime importable (before any work); the source is resolved
(:mod:`oml_core.export.sources`) and its extractor asked for its signature (:class:`~oml_core.interfaces.export.
IExportable`); the graph is traced into a temporary folder beside the output (:mod:`oml_core.export.graph`), the
files of its preprocessing written beside it, the parity checked on probe inputs, the manifest written
(:mod:`oml_core.export.manifest`); then the folder is renamed to the output, whole. Any failure leaves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from oml_core.caches.digests import file_sha256
from oml_core.export.errors import ExportError
from oml_core.export.graph import OPSET, OUTPUT_NAME, trace_to_onnx
from oml_core.export.manifest import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    MODEL_FILE,
    ExportManifest,
    read_export_manifest,
    write_manifest,
)
from oml_core.export.parity import EXAMPLE_BATCH_SIZE, Parity, check_parity
from oml_core.export.preprocessing import describe_image_transforms
from oml_core.export.runtime import cpu_session, require
from oml_core.export.sources import ExportSource, resolve_source
from oml_core.index.storage import new_folder
from oml_core.interfaces.export import BATCH_AXIS, ExportContext, ExportSignature, IExportable
from oml_core.io.provenance import state_dict_sha256
from oml_core.registry import Registry, default_registry
from oml_core.utils.logs import get_logger

logger = get_logger(__name__)

#: The seed of the example and probe inputs.
INPUTS_SEED = 0
#: The dtypes of the graph's inputs, by torch dtype.
_DTYPES = {torch.float32: "float32", torch.int64: "int64"}


@dataclass(frozen=True)
class ExportResult:
    """A written export: its manifest (folder, inputs, figures) and its parity check."""

    manifest: ExportManifest
    parity: Parity


def export_onnx(
    source: str | Path,
    output: str | Path,
    *,
    config: str | Path | None = None,
    registry: Registry | None = None,
) -> ExportResult:
    """Export the extractor of ``source`` (a checkpoint of ``oml train``, an index folder or a zoo key, see
    :mod:`oml_core.export.sources`) to the new folder ``output``: ``model.onnx`` (dynamic batch axis, and each
    other axis the extractor names), ``export.json`` and the files of its preprocessing.

    Args:
        source: The checkpoint file, the index folder or the zoo key.
        output: A folder that does not exist or is empty.
        config: The yaml config of a checkpoint (None: the config recorded in it by ``oml train``).
        registry: Where the components are looked up (``default_registry()`` when None).

    Raises:
        ExportError: ``output`` exists and is not empty; onnxruntime or onnxscript missing; a bad source (see
            :func:`~oml_core.export.sources.resolve_source`); an extractor that is not exportable; an operator with
            no ONNX export (named); a graph whose embeddings differ from PyTorch's above the tolerance (both
            figures). Nothing is left in ``output`` after any error.
    """
    output = Path(output).expanduser()
    check_ready(output)
    registry = registry if registry is not None else default_registry()
    resolved = resolve_source(source, Path(config).expanduser() if config is not None else None, registry)
    return write_export(resolved, output, registry)


def write_export(source: ExportSource, output: str | Path, registry: Registry | None = None) -> ExportResult:
    """Export the extractor of ``source`` (resolved from a checkpoint, an index or a zoo key, or made in Python
    with a model object) to the new folder ``output``; see :func:`export_onnx`.

    Raises:
        ExportError: see :func:`export_onnx`.
    """
    output = Path(output).expanduser()
    check_ready(output)
    registry = registry if registry is not None else default_registry()
    what = f"the extractor {source.extractor_spec['name']!r} of {source.name}"
    signature = export_signature(source, registry, what)
    generator = torch.Generator().manual_seed(INPUTS_SEED)
    example = signature.example_inputs(EXAMPLE_BATCH_SIZE, generator)
    with new_folder(output) as temporary:
        trace_to_onnx(signature, example, temporary / MODEL_FILE, what)
        parity = check_parity(signature, cpu_session(temporary / MODEL_FILE), generator, what)
        if signature.write_assets is not None:
            signature.write_assets(temporary)
        with torch.no_grad():
            feat_dim = int(signature.module(*example).shape[1])
        write_manifest(temporary, _manifest(source, signature, example, feat_dim, parity, temporary))
    logger.debug("Exported %s to %s (relative L2 to PyTorch: %.3g)", what, output, parity.max_relative_l2)
    return ExportResult(read_export_manifest(output), parity)


def check_ready(output: Path) -> None:
    """Check, before any work, that ``output`` can be an export's new folder (:func:`check_output_folder`) and
    that torch's exporter (onnxscript) and onnxruntime (the parity check) are installed.

    Raises:
        ExportError: see :func:`check_output_folder`; a missing module, with ``pip install 'oml-core[onnx]'``.
    """
    check_output_folder(output)
    require("onnxruntime", "oml export (its parity check)")
    require("onnxscript", "torch's ONNX exporter")


def check_output_folder(output: Path) -> None:
    """Check that ``output`` can be an export's new folder: it does not exist, or is an empty folder.

    Raises:
        ExportError: it is a file, or a folder with something in it (never written over).
    """
    if output.exists() and not (output.is_dir() and not any(output.iterdir())):
        raise ExportError(
            f"--output {output}: exists and is not an empty folder; an export is never written over it"
        )


def export_signature(source: ExportSource, registry: Registry, what: str) -> ExportSignature:
    """The extractor's :class:`~oml_core.interfaces.export.ExportSignature` in the context of its ``source``.

    Raises:
        ExportError: the extractor is not :class:`~oml_core.interfaces.export.IExportable`, or refuses the context.
    """
    extractor = source.extractor
    if not isinstance(extractor, IExportable):
        raise ExportError(
            f"{what} cannot be exported to ONNX: {type(extractor).__name__} states no export signature "
            f"(oml_core.interfaces.export.IExportable)"
        )
    transforms = source.transforms(registry)
    images = describe_image_transforms(transforms, source.transforms_spec) if transforms is not None else None
    try:
        return extractor.export_signature(ExportContext(dataset=source.dataset_spec, images=images))
    except ValueError as e:
        raise ExportError(f"{what} cannot be exported to ONNX: {e}") from e


def _manifest(
    source: ExportSource,
    signature: ExportSignature,
    example: tuple[torch.Tensor, ...],
    feat_dim: int,
    parity: Parity,
    folder: Path,
) -> dict[str, Any]:
    from oml_core import __version__

    inputs = []
    for name, tensor in zip(signature.input_names, example):
        if tensor.dtype not in _DTYPES:
            raise ExportError(
                f"the input {name!r} of the graph is of dtype {tensor.dtype}; an export takes "
                f"{' or '.join(_DTYPES.values())}"
            )
        axes = signature.dynamic_axes.get(name, {})
        shape = [axes.get(axis, size) for axis, size in enumerate(tensor.shape)]
        inputs.append({"name": name, "dtype": _DTYPES[tensor.dtype], "shape": shape})
    manifest = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "oml_core": __version__,
        "torch": torch.__version__,
        "opset": OPSET,
        "model": MODEL_FILE,
        "model_sha256": file_sha256(folder / MODEL_FILE),
        "source": {"kind": source.kind, "name": source.name},
        "extractor": source.extractor_spec,
        "weights_sha256": source.weights_sha256,
        "state_dict_sha256": state_dict_sha256(source.extractor.state_dict()),
        "dataset": source.dataset_spec,
        "feat_dim": feat_dim,
        "inputs": inputs,
        "output": {"name": OUTPUT_NAME, "dtype": "float32", "shape": [BATCH_AXIS, feat_dim]},
        "preprocessing": dict(signature.preprocessing),
        "padding": dict(signature.padding),
        "parity": parity.to_dict(),
    }
    return manifest


__all__ = [
    "INPUTS_SEED",
    "ExportResult",
    "check_output_folder",
    "check_ready",
    "export_onnx",
    "export_signature",
    "write_export",
]
