"""ONNX export of an extractor (``oml export``): a checkpoint of ``oml train``, a gallery index's model or a zoo key
to ``model.onnx`` and ``export.json`` (:func:`export_onnx`; a model object: :func:`write_export`), checked against
PyTorch on onnxruntime (:mod:`.parity`), and the ``onnx`` extractor that runs an export
(:class:`~oml_core.export.extractor.OnnxExtractor`, ``extractor.name=onnx extractor.args.path=DIR``).

An extractor family is exported when its class implements :class:`~oml_core.interfaces.export.IExportable`; the
image families use :func:`~oml_core.export.signatures.image_signature`. onnxruntime, onnx and onnxscript are the
extra ``pip install 'oml-core[onnx]'``. The writer (which imports the index and Lightning's run record) is imported
on first access, so that the ``onnx`` extractor and :func:`read_export_manifest` stay light (a service loads them).
"""

from typing import TYPE_CHECKING

from oml_core.export.errors import ExportError
from oml_core.export.manifest import ExportManifest, read_export_manifest
from oml_core.export.parity import PARITY_TOLERANCE
from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ExportSource": "oml_core.export.sources",
        "ExportResult": "oml_core.export.writer",
        "export_onnx": "oml_core.export.writer",
        "write_export": "oml_core.export.writer",
    },
)
