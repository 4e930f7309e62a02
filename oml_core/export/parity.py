"""The parity check of an export: its ONNX graph, run by onnxruntime on the CPU, against the PyTorch module it was
traced from, on probe inputs of other batch sizes than the export's example (which proves the dynamic batch axis).

The figure of a probe is the relative L2 difference of the embeddings, ``||e_onnx - e_torch||_2 /
||e_torch||_2`` over the whole batch; an export whose largest figure is above :data:`PARITY_TOLERANCE` is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from oml_core.export.errors import ExportError
from oml_core.interfaces.export import ExportSignature

#: The largest relative L2 difference between the graph's embeddings and the PyTorch model's.
PARITY_TOLERANCE = 1e-4
#: The batch size of the example inputs that the graph is traced with.
EXAMPLE_BATCH_SIZE = 2
#: The batch sizes of the probes (none is the example's: the batch axis must be dynamic).
PROBE_BATCH_SIZES = (3, 1)


@dataclass(frozen=True)
class ProbeFigure:
    """One probe of the parity check.

    Attributes:
        batch_size: Its items.
        shapes: The shape of each input, by name.
        relative_l2: ``||e_onnx - e_torch||_2 / ||e_torch||_2`` (infinite when the graph's output is not finite or
            of another shape).
    """

    batch_size: int
    shapes: dict[str, list[int]]
    relative_l2: float


@dataclass(frozen=True)
class Parity:
    """The figures of a parity check: the tolerance and each probe's."""

    tolerance: float
    probes: tuple[ProbeFigure, ...]

    @property
    def max_relative_l2(self) -> float:
        """The largest figure of the probes."""
        return max(probe.relative_l2 for probe in self.probes)

    def to_dict(self) -> dict[str, Any]:
        """JSON values: ``{"tolerance", "max_relative_l2", "probes": [{batch_size, shapes, relative_l2}]}`` (an
        infinite figure as the string ``"inf"``)."""
        return {
            "tolerance": self.tolerance,
            "max_relative_l2": _json_float(self.max_relative_l2),
            "probes": [{**asdict(p), "relative_l2": _json_float(p.relative_l2)} for p in self.probes],
        }


def run_session(session: Any, input_names: Sequence[str], inputs: Sequence[Tensor]) -> Tensor:
    """The first output of the onnxruntime ``session`` fed ``inputs`` (on the CPU) under ``input_names``."""
    feed = {name: tensor.detach().cpu().numpy() for name, tensor in zip(input_names, inputs)}
    return torch.from_numpy(np.asarray(session.run(None, feed)[0]))


def relative_l2(found: Tensor, expected: Tensor) -> float:
    """``||found - expected||_2 / ||expected||_2`` in float64 (infinite for another shape or a non-finite value)."""
    if found.shape != expected.shape:
        return float("inf")
    found, expected = found.double(), expected.double()
    scale = float(torch.linalg.vector_norm(expected))
    difference = float(torch.linalg.vector_norm(found - expected)) / max(
        scale, float(np.finfo(np.float64).tiny)
    )
    return difference if np.isfinite(difference) else float("inf")


def check_parity(signature: ExportSignature, session: Any, generator: torch.Generator, what: str) -> Parity:
    """Compare the graph of ``session`` with ``signature.module`` on probes of :data:`PROBE_BATCH_SIZES` items
    drawn from ``generator``.

    Raises:
        ExportError: a figure above :data:`PARITY_TOLERANCE`: ``what: its ONNX graph gives embeddings <figure>
            away (relative L2) ... above the tolerance <tolerance>``.
    """
    module = signature.module.eval()
    figures = []
    for batch_size in PROBE_BATCH_SIZES:
        inputs = signature.example_inputs(batch_size, generator)
        with torch.no_grad():
            expected = module(*inputs).detach().float().cpu()
        found = run_session(session, signature.input_names, inputs)
        shapes = {name: list(tensor.shape) for name, tensor in zip(signature.input_names, inputs)}
        figures.append(ProbeFigure(batch_size, shapes, relative_l2(found, expected)))
    parity = Parity(PARITY_TOLERANCE, tuple(figures))
    if not parity.max_relative_l2 <= PARITY_TOLERANCE:
        worst = max(figures, key=lambda figure: figure.relative_l2)
        raise ExportError(
            f"{what}: its ONNX graph gives embeddings {worst.relative_l2:.3g} away (relative L2) from the PyTorch "
            f"model's on probe inputs {worst.shapes}, above the tolerance {PARITY_TOLERANCE:g}: the export is "
            f"refused and nothing is written"
        )
    return parity


def _json_float(value: float) -> float | str:
    return value if np.isfinite(value) else "inf"


__all__ = [
    "EXAMPLE_BATCH_SIZE",
    "PARITY_TOLERANCE",
    "PROBE_BATCH_SIZES",
    "Parity",
    "ProbeFigure",
    "check_parity",
    "relative_l2",
    "run_session",
]
