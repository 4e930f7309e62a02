"""OML's config groups for a user's own ``@hydra.main`` script: hydra's plugins that oml-core ships.

Hydra discovers its plugins in the namespace package ``hydra_plugins``. Installing oml-core adds two:

- :class:`~hydra_plugins.oml_configs.search_path.OmlSearchPathPlugin` appends ``oml://configs`` to every hydra
  app's config search path, after the app's own config dir (which wins);
- :class:`~hydra_plugins.oml_configs.config_source.OmlConfigSource` reads ``oml://configs``: OML's
  ``CONFIGS_PATH``, i.e. the core's configs then the config dir of every loaded oml plugin, with OML's group
  names (``criterion`` is oml's ``loss``).

So a config written for OML, whose defaults list selects ``sampler: balance``, ``extractor: resnet`` or
``criterion: triplet_with_miner``, composes with hydra alone. Nothing of a config is imported: the plugins'
config dirs are those they register with ``oml_register_config_dirs``, read as files.
"""
