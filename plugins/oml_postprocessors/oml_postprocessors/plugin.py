"""Hook implementations of the ``oml_postprocessors`` plugin: the pairwise re-ranker and its default config.

Factories are lazy ``"module:attr"`` strings: registering imports no torch module. The default config of a
post-processor ``name`` is ``oml_postprocessors/configs/postprocessor/<name>.yaml``.

OML's registry maps ``pairwise_reranker``, and its older names ``pairwise_images`` and ``pairwise_embeddings``,
to ``PairwiseReranker``; so do the aliases here. The distance-matrix classes of the manual
(``PairwiseImagesPostprocessor``, ``PairwiseEmbeddingsPostprocessor``) work on a ``[Q, G]`` matrix, not on
``RetrievalResults``, so they are not ``postprocessor`` components: import them from ``oml_postprocessors``.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback


@hookimpl
def oml_register_postprocessors(register: RegisterCallback) -> None:
    """Register ``pairwise_reranker`` (aliases ``pairwise_images``, ``pairwise_embeddings``)."""
    register(
        "pairwise_reranker",
        "oml_postprocessors.reranker:PairwiseReranker",
        aliases=("pairwise_images", "pairwise_embeddings"),
        description="re-rank the top_n retrieved items of every query with a pairwise model (STIR)",
    )


@hookimpl
def oml_register_config_dirs(register: RegisterCallback) -> None:
    """The default configs: ``postprocessor/<name>.yaml``."""
    register("pkg://oml_postprocessors.configs")
