"""A run's config, in one package: its composition from yaml and overrides (:mod:`~oml_core.config.compose`), the
rules of its values (:mod:`~oml_core.config.rules`), the schema of every pipeline's config and of ``oml index
build``'s (:mod:`~oml_core.config.schemas`), the door through which a config enters a pipeline once, typed
(:mod:`~oml_core.config.typed`), and the components and the data built from it
(:mod:`~oml_core.config.components`, :mod:`~oml_core.config.data`)."""
