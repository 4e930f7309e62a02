"""The error of an export that a user can fix."""

from __future__ import annotations


class ExportError(ValueError):
    """Bad input to ``oml export`` or to the ``onnx`` extractor: a source that is no checkpoint, index or zoo key,
    an output folder that is not empty, an extractor or operator that cannot be exported (named), an export that
    does not reproduce its model (both figures), a folder that is no export (the file named), onnxruntime missing.

    The message is one line: its white space (the new lines of a wrapped error's message) is folded.
    """

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).split()))


__all__ = ["ExportError"]
