"""Default configs of the plugin's components (hydra config groups: ``extractor/tiny_conv.yaml``, ...)."""
