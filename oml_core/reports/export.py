"""What ``oml export`` says of an export it wrote: what was exported, the ONNX model and its inputs, the parity
with PyTorch, the manifest and the command that runs it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oml_core.reports.answer import Answer

if TYPE_CHECKING:  # the result's class, for annotations: the answers import no torch
    from oml_core.export.writer import ExportResult


@dataclass(frozen=True)
class ExportInput:
    """An input of the exported graph: its name, dtype and shape (an axis that varies by its name)."""

    name: str
    dtype: str
    shape: list[int | str]


@dataclass(frozen=True)
class Exported(Answer):
    """An export written by ``oml export`` (see :func:`exported`): the ``extractor``'s name, the kind and name of
    its source (``checkpoint``, ``index``, ``zoo``), the ``model`` file with its ``inputs`` and ``opset``, the
    parity figures (the largest relative L2 to PyTorch of the ``probes`` and the ``tolerance``), the ``manifest``
    file and the overrides of ``oml validate`` that run the export (``validate_overrides``)."""

    extractor: str
    source_kind: str
    source_name: str
    model: str
    inputs: list[ExportInput]
    opset: int
    max_relative_l2: float
    probes: int
    tolerance: float
    manifest: str
    validate_overrides: list[str]

    def as_text(self) -> str:
        """A line each: what was exported, the model with its inputs, the parity, the manifest, how to run it."""
        inputs = "; ".join(
            f"{item.name} {item.dtype} [{', '.join(str(axis) for axis in item.shape)}]"
            for item in self.inputs
        )
        return "\n".join(
            [
                f"Exported:         {self.extractor} of the {self.source_kind} {self.source_name}",
                f"ONNX model:       {self.model} (inputs: {inputs}; opset {self.opset})",
                f"Parity:           relative L2 {self.max_relative_l2:.3g} to PyTorch on {self.probes} probes "
                f"(tolerance {self.tolerance:g})",
                f"Manifest:         {self.manifest}",
                f"Run it:           oml validate {shlex.join(self.validate_overrides)}",
            ]
        )


def exported(result: ExportResult) -> Exported:
    """The answer of ``oml export`` from the result of :func:`~oml_core.export.writer.export_onnx`."""
    from oml_core.export.manifest import MANIFEST_FILE  # the export package imports torch: the answers do not

    manifest, parity = result.manifest, result.parity
    data = manifest.data
    return Exported(
        extractor=data["extractor"]["name"],
        source_kind=data["source"]["kind"],
        source_name=data["source"]["name"],
        model=str(manifest.model_path),
        inputs=[ExportInput(item.name, item.dtype, list(item.shape)) for item in manifest.inputs],
        opset=data["opset"],
        max_relative_l2=parity.max_relative_l2,
        probes=len(parity.probes),
        tolerance=parity.tolerance,
        manifest=str(manifest.folder / MANIFEST_FILE),
        validate_overrides=manifest.validate_overrides(str(manifest.folder)),
    )


__all__ = ["ExportInput", "Exported", "exported"]
