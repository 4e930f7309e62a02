"""Converters of upstream checkpoint formats into the state dicts of this plugin's extractors.

A zoo row names its converter as ``"oml_models.converters.<family>:<function>"``; it is imported only when
that checkpoint is loaded (:func:`oml_core.zoo.load_pretrained_state_dict`).
"""
