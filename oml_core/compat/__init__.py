"""OML 4.0's import paths, names and registry dicts over oml, for code written for OML run with ``oml`` ->
``oml_core``: the forwarding modules of OML's paths that have no module of their own in the core
(:mod:`oml_core.compat.modules`, the table ``OML_MODULES``; each a file of the tree ``oml_paths/``, written from
the table by :mod:`oml_core.compat.tree`), OML's ``*_REGISTRY`` dicts as views of the registry
(:mod:`oml_core.compat.registries`), OML's ``CONFIGS_PATH`` over the plugins' config dirs
(:mod:`oml_core.compat.configs`) and OML's names of core modules that live in the post-processor plugins
(:mod:`oml_core.compat.postprocessor_names`).

No module of the core imports this package, and ``import oml_core`` installs no import hook. It is imported when
an OML name is asked for: an OML path of the tree (``import oml_core.losses.triplet``), which Python finds on the
``__path__`` of ``oml_core`` and of the core packages that hold such paths (:mod:`oml_core.utils.oml_path_folders`),
or an OML name that a core module exports lazily from here (``oml_core.registry.TRANSFORMS_REGISTRY``,
``oml_core.const.CONFIGS_PATH``, ``oml_core.datasets.pairs.PairDataset``, ``oml_core.inference.pairwise_inference``).
"""
