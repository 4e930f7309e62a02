"""The core's own plugin: optimizers, schedulers, basic transforms and retrieval metrics.

It is registered through the same hooks as any third-party plugin (see :mod:`.plugin`).
"""
