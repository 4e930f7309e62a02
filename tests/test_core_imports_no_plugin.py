"""The rule of the house: the core imports no plugin (it reaches plugins through the registry only)."""

from __future__ import annotations

import ast
from pathlib import Path

import oml_core
from oml_core.registry.catalog import FIRST_PARTY_PROVIDERS

#: The import packages of the first-party plugin distributions (``oml-losses`` -> ``oml_losses``).
PLUGIN_PACKAGES = {distribution.replace("-", "_") for distribution in FIRST_PARTY_PROVIDERS.values()}


def _imported_packages(path: Path) -> set[str]:
    packages = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            packages |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            packages.add(node.module.split(".")[0])
    return packages


def test_no_core_module_imports_a_plugin_package():
    root = Path(oml_core.__file__).parent
    offenders = {
        str(path.relative_to(root)): sorted(_imported_packages(path) & PLUGIN_PACKAGES)
        for path in sorted(root.rglob("*.py"))
    }
    assert {path: found for path, found in offenders.items() if found} == {}


def test_the_check_sees_an_import_of_a_plugin(tmp_path):
    assert PLUGIN_PACKAGES == {
        "oml_models",
        "oml_losses",
        "oml_samplers",
        "oml_loggers",
        "oml_postprocessors",
        "oml_pml",
        "oml_faiss",
        "oml_qdrant",
        "oml_ray",
        "oml_texts",
        "oml_audio",
        "oml_serve",
    }
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from oml_losses.miners import PairsMiner\n    import oml_models.vit as v\n"
    )
    assert _imported_packages(module) == {"oml_losses", "oml_models"}
