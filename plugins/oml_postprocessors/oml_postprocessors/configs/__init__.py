"""Default configs of the pairwise post-processors: ``postprocessor/<name>.yaml``, one per name."""
