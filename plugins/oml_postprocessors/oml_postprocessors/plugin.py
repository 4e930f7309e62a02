"""The plugin module of the ``oml_postprocessors`` plugin: the pairwise re-ranker and its default config.

:data:`COMPONENTS` is the plugin's one table: declared as ``OML_COMPONENTS``, the registry registers it, and the
package ``oml_postprocessors`` takes its lazy exports and ``__all__`` from it and from :data:`EXTRA_EXPORTS`.
Factories are lazy ``"module:attr"`` strings: registering imports no torch module. The default config of a
post-processor ``name`` is ``oml_postprocessors/configs/postprocessor/<name>.yaml``.

OML's registry maps ``pairwise_reranker``, and its older names ``pairwise_images`` and ``pairwise_embeddings``,
to ``PairwiseReranker``; so do the aliases here. The distance-matrix classes of the manual
(``PairwiseImagesPostprocessor``, ``PairwiseEmbeddingsPostprocessor``) work on a ``[Q, G]`` matrix, not on
``RetrievalResults``, so they are not ``postprocessor`` components: import them from ``oml_postprocessors``.
"""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component

#: Every component of the plugin, each exported by ``oml_postprocessors`` under its class name.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "postprocessor",
        "pairwise_reranker",
        "oml_postprocessors.reranker:PairwiseReranker",
        "re-rank the top_n retrieved items of every query with a pairwise model (STIR)",
        aliases=("pairwise_images", "pairwise_embeddings"),
    ),
)

#: The other public names of ``oml_postprocessors`` (the distance-matrix classes and helpers):
#: ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType(
    {
        "PairwisePostprocessor": "oml_postprocessors.pairwise",
        "PairwiseEmbeddingsPostprocessor": "oml_postprocessors.pairwise",
        "PairwiseImagesPostprocessor": "oml_postprocessors.pairwise",
        "PairDataset": "oml_postprocessors.pairs",
        "pairwise_inference": "oml_postprocessors.inference",
        "pairwise_inference_by_ids": "oml_postprocessors.inference",
        "rerank_top_n": "oml_postprocessors.ordering",
        "update_top_n_in_matrix": "oml_postprocessors.ordering",
    }
)

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_postprocessors.configs",)
