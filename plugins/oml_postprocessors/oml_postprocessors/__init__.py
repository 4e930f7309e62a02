"""oml-postprocessors: pairwise re-ranking post-processors (STIR-style) for oml.

The re-rankers (``PairwiseReranker`` and the pairwise postprocessors of OML's manual) are being built in
the re-ranking issue; until then this distribution installs its entry point and registers no component.
"""
