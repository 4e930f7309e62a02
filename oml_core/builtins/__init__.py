"""The core's own plugin: optimizers, schedulers, basic transforms and retrieval metrics.

It is registered as any third-party plugin is, from its declared table (see :mod:`.plugin`).
"""
