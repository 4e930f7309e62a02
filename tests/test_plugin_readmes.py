"""Every first-party plugin has a README that lists exactly what the plugin registers, so that they cannot drift.

Each plugin is loaded alone (its entry-point module in a fresh ``Registry``, no entry points, no built-ins) and
its components are compared with the rows of its README's tables: a row per component, ``| `kind` | `name` | ...``.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import tomllib

from oml_core.registry import KINDS, Registry

ROOT = Path(__file__).parents[1]
PLUGIN_DIRS = sorted(path.parent for path in ROOT.glob("plugins/*/pyproject.toml"))
#: A table row naming a component: its first two cells are a kind and a name, each in backticks.
ROW = re.compile(r"^\|\s*`(?P<kind>[a-z_]+)`\s*\|\s*`(?P<name>[^`]+)`\s*\|", re.MULTILINE)


def _project(plugin_dir: Path) -> dict:
    return tomllib.loads((plugin_dir / "pyproject.toml").read_text())["project"]


def registered_components(plugin_dir: Path) -> set[tuple[str, str]]:
    """``(kind, name)`` of every component that the plugin of ``plugin_dir`` registers, loaded alone from the
    module of its ``oml`` entry point."""
    ((name, module_path),) = _project(plugin_dir)["entry-points"]["oml"].items()
    registry = Registry(
        plugins=[(name, importlib.import_module(module_path))],
        load_entrypoints=False,
        builtins=False,
        strict=True,
    )
    return {(kind, entry.name) for kind in KINDS for entry in registry.entries(kind)}


def readme_components(readme: str) -> set[tuple[str, str]]:
    """``(kind, name)`` of the table rows of ``readme`` that name a component (see :data:`ROW`)."""
    return {(m["kind"], m["name"]) for m in ROW.finditer(readme)}


def test_every_plugin_directory_is_checked() -> None:
    assert [path.name for path in PLUGIN_DIRS] == [
        "oml_audio",
        "oml_faiss",
        "oml_loggers",
        "oml_losses",
        "oml_models",
        "oml_pml",
        "oml_postprocessors",
        "oml_qdrant",
        "oml_ray",
        "oml_samplers",
        "oml_serve",
        "oml_texts",
    ]


@pytest.mark.parametrize("plugin_dir", PLUGIN_DIRS, ids=lambda path: path.name)
def test_the_readme_lists_every_component_the_plugin_registers(plugin_dir: Path) -> None:
    registered = registered_components(plugin_dir)
    listed = readme_components((plugin_dir / "README.md").read_text())
    assert registered, plugin_dir.name  # the plugin loaded and registered something
    assert sorted(registered - listed) == [], "registered but not in the README"
    assert sorted(listed - registered) == [], "in the README but not registered"


@pytest.mark.parametrize("plugin_dir", PLUGIN_DIRS, ids=lambda path: path.name)
def test_the_readme_is_the_distributions_readme_and_says_how_to_install_it(plugin_dir: Path) -> None:
    project = _project(plugin_dir)
    assert project["readme"] == "README.md"
    readme = (plugin_dir / "README.md").read_text()
    assert readme.startswith(f"# {project['name']}\n")
    assert f"pip install {project['name']}" in readme
    for extra in project.get("optional-dependencies", {}):
        assert f"[{extra}]" in readme, extra
    for requirement in project["dependencies"]:
        name = re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0]
        assert f"`{name}" in readme, name


def test_the_row_pattern_reads_kind_and_name() -> None:
    readme = (
        "| kind | name |\n|---|---|\n| `loss` | `triplet` | a loss |\n| `pretrained` | `vits16_dino` | x |\n"
    )
    assert readme_components(readme) == {("loss", "triplet"), ("pretrained", "vits16_dino")}
