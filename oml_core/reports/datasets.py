"""What ``oml mock-dataset`` and ``oml check-dataframe`` say: where the mock dataset was written, and a csv's
problems and warnings."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from oml_core.reports.answer import Answer


@dataclass(frozen=True)
class MockDatasetWritten(Answer):
    """The mock dataset written by ``oml mock-dataset`` to the folder ``root``."""

    root: str

    def as_text(self) -> str:
        """``Mock dataset written to <root>``."""
        return f"Mock dataset written to {self.root}"


@dataclass(frozen=True)
class DataFrameCheck(Answer):
    """The check of a csv in OML's format (:func:`check_dataframe`): ``error``, why it is not in the format (None:
    it is), and ``warnings``, what it cannot serve (e.g. without train rows: validate/predict only)."""

    csv: str
    error: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the csv is in the format (warnings or not)."""
        return self.error is None

    def messages(self) -> list[str]:
        """``error: <why>`` when it is not in the format, else ``warning: <what>`` per warning (none: a csv that
        is fine); ``oml check-dataframe`` prints each on stderr after its name."""
        if self.error is not None:
            return [f"error: {self.error}"]
        return [f"warning: {warning}" for warning in self.warnings]

    def as_text(self) -> str:
        """The :meth:`messages`, one after the other."""
        return "\n".join(self.messages())


def check_dataframe(csv: Path, dataset_root: Path | None, sep: str, encoding: str) -> DataFrameCheck:
    """Check the csv ``csv`` (``sep``-separated text in ``encoding``), its relative paths joined to
    ``dataset_root`` (None: the csv's folder), with :func:`~oml_core.datasets.dataframe_format
    .check_retrieval_dataframe_format` (whose summary of a csv in the format is logged); its problems (or a missing
    file) are the answer's ``error``, the warnings it gives the answer's ``warnings``."""
    from oml_core.datasets.dataframe_format import DataFrameFormatError, check_retrieval_dataframe_format

    root = dataset_root if dataset_root is not None else csv.parent
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_retrieval_dataframe_format(csv, dataset_root=root, sep=sep, verbose=True, encoding=encoding)
        except (DataFrameFormatError, FileNotFoundError) as e:
            return DataFrameCheck(csv=str(csv), error=str(e))
    return DataFrameCheck(csv=str(csv), warnings=[str(warning.message) for warning in caught])


__all__ = ["DataFrameCheck", "MockDatasetWritten", "check_dataframe"]
