"""``onnx``: the extractor that runs an export of ``oml export`` with onnxruntime, so that ``oml validate``, ``oml
index build`` and ``oml search`` (and the serving plugin) embed with the exported graph
(``extractor.name=onnx extractor.args.path=DIR``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from oml_core.export.errors import ExportError
from oml_core.export.manifest import MANIFEST_FILE, ExportManifest, read_export_manifest
from oml_core.export.parity import run_session
from oml_core.export.runtime import session
from oml_core.interfaces.models import IExtractor

#: The numpy dtypes of the inputs, by the manifest's names.
_NUMPY_DTYPES = {"float32": np.float32, "int64": np.int64}


class OnnxExtractor(IExtractor):
    """An exported graph (``model.onnx`` of an export folder) as an extractor: ``forward(x)`` runs the graph on
    onnxruntime and returns its embeddings ``[B, feat_dim]`` as a float32 tensor on ``x``'s device.

    ``x`` is what the dataset component's items hold as the extractor's input, batched: a tensor (images,
    waveforms) for a graph of one input, or a mapping of the graph's input names to tensors (texts' ``input_ids``
    and ``attention_mask``). The inputs are cast to the dtypes of the manifest; the trailing positions of an axis
    that the manifest's ``padding`` names are cut off where its mask is 0 in every item (the padding of a batch
    of short texts: they change no other position's output). The module has no parameters:
    training it is not possible, and its state dict is empty.

    Args:
        path: The export folder (``oml export SOURCE --output DIR``); null is refused.
        device: Where onnxruntime runs the graph: ``cpu`` (``CPUExecutionProvider``), or ``cuda``/``cuda:<i>``
            (``CUDAExecutionProvider``, from ``onnxruntime-gpu``).

    Raises:
        ExportError: no ``path``; the folder is no export (its manifest names the fault); onnxruntime is
            missing (``pip install 'oml-core[onnx]'``) or has no provider for ``device``.
    """

    def __init__(self, path: str | Path | None, device: str = "cpu") -> None:
        if path is None:
            raise ExportError(
                "the onnx extractor's path is null: give the export folder (extractor.args.path=DIR)"
            )
        super().__init__()
        #: The parsed ``export.json`` (the serving plugin compares its ``weights_sha256`` with an index's).
        self.manifest: ExportManifest = read_export_manifest(Path(path).expanduser())
        self.device_name = device
        self.session = session(self.manifest.model_path, device)
        self.input_names = tuple(item.name for item in self.manifest.inputs)

    @property
    def feat_dim(self) -> int:
        """The size of the embeddings (the manifest's ``feat_dim``)."""
        return self.manifest.feat_dim

    def forward(self, x: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Embeddings ``[B, feat_dim]`` of the batch ``x`` (see the class), on ``x``'s device.

        Raises:
            ExportError: a tensor for a graph of several inputs, a mapping without one of the graph's inputs, an
                input of another shape than the manifest's.
        """
        if isinstance(x, Tensor):
            if len(self.input_names) != 1:
                raise ExportError(
                    f"the export {self.manifest.folder} takes {len(self.input_names)} inputs "
                    f"({', '.join(self.input_names)}): give them as a mapping"
                )
            tensors = [x]
        else:
            missing = [name for name in self.input_names if name not in x]
            if missing:
                raise ExportError(
                    f"the export {self.manifest.folder} takes the inputs {', '.join(self.input_names)}; the batch "
                    f"lacks {', '.join(missing)}"
                )
            tensors = [x[name] for name in self.input_names]
        self._check_shapes(tensors)
        device = tensors[0].device
        tensors = self._without_trailing_padding(tensors)
        cast = [
            torch.from_numpy(tensor.detach().cpu().numpy().astype(_NUMPY_DTYPES[item.dtype], copy=False))
            for tensor, item in zip(tensors, self.manifest.inputs)
        ]
        return run_session(self.session, self.input_names, cast).float().to(device)

    def _check_shapes(self, tensors: list[Tensor]) -> None:
        """Check every input against the manifest's shape: its number of axes and each fixed size.

        Raises:
            ExportError: another shape (e.g. images of another size than the export's preprocessing makes).
        """
        for tensor, item in zip(tensors, self.manifest.inputs):
            fits = tensor.ndim == len(item.shape) and all(
                isinstance(size, str) or size == found for size, found in zip(item.shape, tensor.shape)
            )
            if not fits:
                expected = ", ".join(str(size) for size in item.shape)
                raise ExportError(
                    f"the export {self.manifest.folder} takes {item.name} of shape [{expected}], got "
                    f"{list(tensor.shape)}: give it inputs made by its preprocessing ({MANIFEST_FILE})"
                )

    def _without_trailing_padding(self, tensors: list[Tensor]) -> list[Tensor]:
        """``tensors`` cut, on each axis of the manifest's ``padding``, after the last position that its mask
        input holds in some item of the batch (at least one position is kept)."""
        inputs = self.manifest.inputs
        for axis_name, mask_name in self.manifest.padding.items():
            position = next(i for i, item in enumerate(inputs) if item.name == mask_name)
            mask = tensors[position]
            axis = inputs[position].shape.index(axis_name)
            held = mask.movedim(axis, 0).reshape(mask.shape[axis], -1).ne(0).any(dim=1).nonzero()
            length = int(held.max()) + 1 if len(held) else 1
            tensors = [
                tensor.narrow(item.shape.index(axis_name), 0, length) if axis_name in item.shape else tensor
                for tensor, item in zip(tensors, inputs)
            ]
        return tensors

    def extra_repr(self) -> str:
        return f"path={str(self.manifest.folder)!r}, device={self.device_name!r}"

    def __getstate__(self) -> dict[str, Any]:
        """The state without the onnxruntime session (which cannot be pickled); :meth:`__setstate__` opens it
        again (a DataLoader's worker or a DDP process gets the extractor pickled)."""
        state = self.__dict__.copy()
        state.pop("session", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.session = session(self.manifest.model_path, self.device_name)


__all__ = ["OnnxExtractor"]
