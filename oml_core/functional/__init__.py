"""Pure tensor functions shared by the core and the plugins (retrieval metrics, ...)."""

from oml_core.utils.oml_path_folders import oml_paths_folder

# OML's module paths here that live elsewhere (oml_core.functional.knn): the folder of compat's tree
__path__.append(oml_paths_folder(__name__))
