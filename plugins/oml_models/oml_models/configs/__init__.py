"""Default configs of the extractors, pairwise models and transforms: ``<kind>/<name>.yaml``, one per name."""
