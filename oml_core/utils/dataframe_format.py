"""OML's import path ``oml.utils.dataframe_format``: the checker lives in :mod:`oml_core.datasets`."""

from oml_core.datasets.dataframe_format import DataFrameFormatError, check_retrieval_dataframe_format

__all__ = ["DataFrameFormatError", "check_retrieval_dataframe_format"]
