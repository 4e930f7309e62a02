"""Retrieval: ``RetrievalResults`` (memory-bounded kNN of queries among gallery items) and the post-processors
that need no model (``ConstantThresholding``, ``AdaptiveThresholding``).

OML's ``PairwiseReranker`` (``from oml_core.retrieval import PairwiseReranker``) is the pairwise re-ranker of the
installed post-processor plugin (oml-postprocessors), found on first access through OML's
``oml_core.retrieval.postprocessors.pairwise`` (:mod:`oml_core.compat.modules`): the core imports no plugin.
"""

import importlib
import sys
from typing import Any

from oml_core.retrieval.postprocessors.thresholding import AdaptiveThresholding, ConstantThresholding
from oml_core.retrieval.retrieval_results import RetrievalResults

#: OML's names of this package that live in plugins: ``{name: the OML module that forwards them}``.
_FORWARDED = {"PairwiseReranker": "oml_core.retrieval.postprocessors.pairwise"}


def __getattr__(name: str) -> Any:
    if name not in _FORWARDED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_FORWARDED[name]), name)
    setattr(sys.modules[__name__], name, value)
    return value


__all__ = ["AdaptiveThresholding", "ConstantThresholding", "PairwiseReranker", "RetrievalResults"]
