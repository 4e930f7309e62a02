"""A differentiable matrix of the Euclidean distances within a batch, exact near zero.

The losses that need many distances of one batch (all its triplets, the soft ranks of surrogate
precision) take them from this one ``[B, B]`` matrix instead of gathering per-triplet copies of the features.
It is the core's :func:`oml_core.utils.misc_torch.pairwise_l2` (the one Euclidean distance of oml, see
:mod:`oml_core.utils.misc_torch`), exported here under the name the losses have always used.
"""

from __future__ import annotations

from oml_core.utils.misc_torch import CLOSE_RATIO, PAIRS_CHUNK_VALUES, pairwise_l2

__all__ = ["CLOSE_RATIO", "PAIRS_CHUNK_VALUES", "pairwise_l2"]
