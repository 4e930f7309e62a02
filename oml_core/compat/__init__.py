"""OML 4.0's import paths and registry dicts over oml: the forwarding modules of the paths that have no module of
their own (:mod:`oml_core.compat.modules`) and OML's ``*_REGISTRY`` dicts as views of the registry
(:mod:`oml_core.compat.registries`). Code written for OML runs with ``oml`` -> ``oml_core``; nothing else in the
core imports this package."""
