"""onnxruntime, the extra of oml-core that runs an export (``pip install 'oml-core[onnx]'``): imported when first
needed, its absence one line that says what to install."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oml_core.export.errors import ExportError

#: What installs the export's dependencies (onnx, onnxscript for torch's exporter, onnxruntime).
INSTALL_HINT = "pip install 'oml-core[onnx]'"


def require(module: str, purpose: str) -> Any:
    """The module ``module`` (``onnxruntime``, ``onnxscript``) imported.

    Raises:
        ExportError: it is not installed; the message names it, ``purpose`` and :data:`INSTALL_HINT`.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ExportError(f"{purpose} needs {module}, which is not installed: {INSTALL_HINT}") from e


def cpu_session(model: Path) -> Any:
    """An onnxruntime ``InferenceSession`` of the graph ``model`` on the ``CPUExecutionProvider``, one thread
    per physical core as onnxruntime chooses."""
    return session(model, "cpu")


def session(model: Path, device: str) -> Any:
    """An onnxruntime ``InferenceSession`` of the graph ``model`` on ``device``: ``cpu``, or ``cuda``/``cuda:i``
    (the ``CUDAExecutionProvider``, device ``i``).

    Raises:
        ExportError: onnxruntime is missing; ``cuda`` asked and this onnxruntime has no CUDA provider; the file is
            no ONNX graph (naming it).
    """
    ort = require("onnxruntime", "running an ONNX export")
    kind, _, index = device.partition(":")
    if kind == "cpu" and not index:
        providers: list[Any] = ["CPUExecutionProvider"]
    elif kind == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ExportError(
                f"the onnx extractor on {device} needs onnxruntime's CUDAExecutionProvider, which this onnxruntime "
                f"lacks (providers: {', '.join(ort.get_available_providers())}): pip install onnxruntime-gpu, or "
                f"use device cpu"
            )
        providers = [("CUDAExecutionProvider", {"device_id": int(index or 0)}), "CPUExecutionProvider"]
    else:
        raise ExportError(f"the onnx extractor's device must be cpu, cuda or cuda:<i>, got {device!r}")
    try:
        return ort.InferenceSession(str(model), providers=providers)
    except (
        Exception
    ) as e:  # onnxruntime's own errors (InvalidGraph, NoSuchFile ...) have no public base class
        raise ExportError(f"{model}: onnxruntime cannot load it ({type(e).__name__}: {e})") from e


__all__ = ["INSTALL_HINT", "cpu_session", "require", "session"]
