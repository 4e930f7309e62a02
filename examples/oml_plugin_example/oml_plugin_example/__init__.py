"""An example third-party ``oml`` plugin.

``oml_plugin_example.extractor.TinyConvExtractor`` (extractor ``tiny_conv``) and
``oml_plugin_example.loss.ContrastiveLoss`` (loss ``contrastive_example``), registered by
:mod:`oml_plugin_example.plugin`. This file imports nothing, so that loading the entry point stays cheap.
"""
