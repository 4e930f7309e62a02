"""ONNX export of an extractor (``oml export``): a checkpoint of ``oml train``, a gallery index's model or a zoo key
to ``model.onnx`` and ``export.json`` (:func:`export_onnx`), checked against PyTorch on onnxruntime
(:mod:`.parity`), and the ``onnx`` extractor that runs an export (:class:`~oml_core.export.extractor.OnnxExtractor`,
``extractor.name=onnx extractor.args.path=DIR``).

An extractor family is exported when its class implements :class:`~oml_core.interfaces.export.IExportable`; the
image families use :func:`~oml_core.export.signatures.image_signature`. onnxruntime, onnx and onnxscript are the
extra ``pip install 'oml-core[onnx]'``.
"""

from oml_core.export.errors import ExportError
from oml_core.export.manifest import ExportManifest, read_export_manifest
from oml_core.export.parity import PARITY_TOLERANCE
from oml_core.export.sources import ExportSource
from oml_core.export.writer import ExportResult, export_onnx, write_export

__all__ = [
    "PARITY_TOLERANCE",
    "ExportError",
    "ExportManifest",
    "ExportResult",
    "ExportSource",
    "export_onnx",
    "read_export_manifest",
    "write_export",
]
