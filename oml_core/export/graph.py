"""Tracing an extractor to an ONNX graph with torch's exporter (``torch.onnx.export(..., dynamo=True)``: the one
that exports every family of the plugins, ECAPA-TDNN's complex STFT among them; the TorchScript exporter does not),
and the one line of an operator that cannot be exported."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from oml_core.export.errors import ExportError
from oml_core.export.runtime import require
from oml_core.interfaces.export import BATCH_AXIS, ExportSignature
from oml_core.utils.logs import get_logger

logger = get_logger(__name__)

#: The ONNX opset of the graphs written (torch 2.14's exporter's own; onnxruntime >= 1.17 runs it).
OPSET = 20
#: The name of the graph's output: the embeddings ``[batch, feat_dim]``.
OUTPUT_NAME = "embeddings"
#: How torch's exporter names an operator it has no ONNX function for (``<OpOverload(op='aten.cummax', ...)>``).
_OPERATOR = re.compile(r"op='([\w.]+)', overload='(\w+)'")


def trace_to_onnx(signature: ExportSignature, inputs: tuple[Tensor, ...], path: Path, what: str) -> None:
    """Write the graph of ``signature.module`` called on ``inputs`` to ``path``, with the dynamic axes of the
    signature (the batch and every other named axis), opset :data:`OPSET`, the weights inside the file. What torch's
    exporter prints or warns meanwhile (the process's stdout and stderr are redirected while it runs) goes to the
    debug log: the library prints nothing, and a failure is the one line of :class:`ExportError`.

    Raises:
        ExportError: onnxscript (torch's exporter's dependency) is missing; the module has an operator that has
            no ONNX function (``what: the operator aten.cummax has no ONNX export ...``); torch cannot trace it
            (the first line of torch's reason).
    """
    require("onnxscript", "torch's ONNX exporter")
    dims: dict[str, Any] = {}
    shapes = tuple(
        {
            axis: _dim(dims, axis_name, signature.min_sizes)
            for axis, axis_name in signature.dynamic_axes.get(name, {}).items()
        }
        for name in signature.input_names
    )
    module = signature.module.eval()
    said = io.StringIO()  # torch's exporter prints (a partial graph on stderr) and logs to stderr as it fails
    with (
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stdout(said),
        contextlib.redirect_stderr(said),
        torch.no_grad(),
    ):
        warnings.simplefilter("always")
        try:
            torch.onnx.export(
                module,
                inputs,
                str(path),
                input_names=list(signature.input_names),
                output_names=[OUTPUT_NAME],
                dynamic_shapes=shapes,
                opset_version=OPSET,
                dynamo=True,
                external_data=False,
                verbose=False,
            )
        except Exception as e:  # torch's exporter raises its own error types for any failure of its 3 steps
            raise ExportError(f"{what} cannot be exported to ONNX: {export_failure(e)}") from e
        finally:
            for warning in caught:
                logger.debug("torch.onnx.export: %s", warning.message)
            if said.getvalue().strip():
                logger.debug("torch.onnx.export said: %s", said.getvalue())


def _dim(dims: dict[str, Any], name: str, min_sizes: Mapping[str, int]) -> Any:
    """The one ``torch.export.Dim`` of the axis ``name`` (shared by the inputs that name it), at least 1 for the
    batch and ``min_sizes[name]`` (else 2) for the others."""
    if name not in dims:
        low = 1 if name == BATCH_AXIS else min_sizes.get(name, 2)
        dims[name] = torch.export.Dim(name, min=low)
    return dims[name]


def export_failure(error: BaseException) -> str:
    """The one line of an export's failure: ``the operator aten.x has no ONNX export (...)`` when torch's exporter
    found no ONNX function for an operator (its ``DispatchError``, somewhere in the chain of causes), else the
    type and first line of the deepest cause's message."""
    chain = [error]
    while chain[-1].__cause__ is not None and len(chain) < 20:
        chain.append(chain[-1].__cause__)
    for link in chain:
        found = _OPERATOR.search(str(link))
        if found is not None and type(link).__name__ == "DispatchError":
            operator = found.group(1) if found.group(2) == "default" else f"{found.group(1)}.{found.group(2)}"
            return (
                f"the operator {operator} has no ONNX export in torch {torch.__version__} (opset {OPSET}); replace "
                f"it in the model, or keep the model in PyTorch"
            )
    deepest = chain[-1]
    lines = [line.strip() for line in str(deepest).splitlines() if line.strip()]
    return f"{type(deepest).__name__}: {lines[0] if lines else ''}"


__all__ = ["OPSET", "OUTPUT_NAME", "export_failure", "trace_to_onnx"]
