"""Default configs of the extractors and pairwise models: ``<kind>/<name>.yaml``, one per name."""
