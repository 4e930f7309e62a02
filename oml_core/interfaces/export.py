"""The optional interface of an extractor that can be exported to ONNX (``oml export``): :class:`IExportable`,
the :class:`ExportContext` it is given and the :class:`ExportSignature` it answers with.

An extractor states how its graph is called (the inputs' names, which of their axes vary, example inputs to trace
and to probe it with) and what a caller must do to its raw data first (the preprocessing: image size, mean and std;
the tokenizer and ``max_length``; the sample rate). ``oml_core.export`` traces :attr:`ExportSignature.module` with
these inputs, writes the graph and a manifest, and checks the graph against the module on other inputs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch import Generator, Tensor, nn

if TYPE_CHECKING:
    from pathlib import Path

#: The name of the batch axis (axis 0 of every input and of the output) in :attr:`ExportSignature.dynamic_axes`.
BATCH_AXIS = "batch"


@dataclass(frozen=True)
class ExportContext:
    """What the source of an export knows of the data its extractor reads, beside the extractor itself.

    Attributes:
        dataset: The ``{name, args}`` spec of the dataset component of the source's config (None: images), e.g.
            the texts' ``max_length`` or the audio's ``sample_rate``.
        images: The image preprocessing described from the source's transforms (``image_size``, ``mean``,
            ``std``, ``interpolation``, ``transforms``: their spec, ``steps``), or None: no image transforms.
    """

    dataset: Mapping[str, Any] | None = None
    images: Mapping[str, Any] | None = None

    @property
    def dataset_args(self) -> Mapping[str, Any]:
        """The ``args`` of :attr:`dataset` (empty without one)."""
        args = (self.dataset or {}).get("args")
        return args if isinstance(args, Mapping) else {}


@dataclass(frozen=True)
class ExportSignature:
    """How an exported graph is called.

    Attributes:
        module: What is traced: called with the tensors of :attr:`example_inputs`, positionally in the order of
            :attr:`input_names`, it returns the embeddings ``[batch, feat_dim]`` (the extractor itself, or a
            module that calls it on tensors when its ``forward`` takes a mapping).
        input_names: The graph's inputs, in the order of the module's arguments.
        dynamic_axes: ``{input name: {axis: axis name}}``: the axes that vary between calls; axis 0 of every
            input is :data:`BATCH_AXIS`; inputs that share an axis name share its size (``sequence``).
        example_inputs: ``example_inputs(batch_size, generator)``: inputs of ``batch_size`` items drawn from
            ``generator`` (the export's example, then the probes of the parity check; the other dynamic axes
            may differ between draws).
        preprocessing: JSON values: what a caller does to raw data to make the inputs (written to
            ``export.json``; a file written by :attr:`write_assets` is named relative to the export folder).
        min_sizes: ``{axis name: smallest size}`` of dynamic axes other than the batch (e.g. samples of a
            waveform that the features need); the others are at least 2.
        write_assets: Writes the files a caller needs beside the graph into the export folder (a tokenizer);
            None: none.
        padding: ``{axis name: mask input}``: a dynamic axis whose trailing positions are padding where the
            input ``mask`` (of that axis) is 0 in every item of the batch; they change no other position's output,
            so the ``onnx`` extractor cuts them off before it runs the graph (texts: ``{"sequence":
            "attention_mask"}``).
    """

    module: nn.Module
    input_names: tuple[str, ...]
    dynamic_axes: Mapping[str, Mapping[int, str]]
    example_inputs: Callable[[int, Generator], tuple[Tensor, ...]]
    preprocessing: Mapping[str, Any]
    min_sizes: Mapping[str, int] = field(default_factory=dict)
    write_assets: Callable[[Path], None] | None = None
    padding: Mapping[str, str] = field(default_factory=dict)


class IExportable(ABC):
    """An extractor that ``oml export`` can write to ONNX (an optional interface beside
    :class:`~oml_core.interfaces.models.IExtractor`)."""

    @abstractmethod
    def export_signature(self, context: ExportContext) -> ExportSignature:
        """How the extractor's graph is called and what a caller must do to the raw data first.

        Args:
            context: What the export's source knows of the data (its dataset component, its image transforms).

        Raises:
            ValueError: the extractor cannot be exported with this context (the message says why).
        """


__all__ = ["BATCH_AXIS", "ExportContext", "ExportSignature", "IExportable"]
