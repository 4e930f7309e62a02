"""The built wheels of the core, of every plugin and of the example plugin ship what an installed distribution
needs: every default config (``<package>/configs/**/*.yaml``), the ``py.typed`` marker, the license metadata (an SPDX
expression; and the license file where the project has one), and no tests; the core's, the files of OML's module
paths (``oml_core/compat/oml_paths/``).

Each wheel is built offline (``pip wheel --no-deps --no-build-isolation --no-index``) from a copy of its project
in a temporary directory, so that the build leaves nothing in the working tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

import pytest
import tomllib

from oml_core.compat.tree import oml_path_files

ROOT = Path(__file__).parents[1]
#: Every distribution of the repository: its project directory.
PROJECTS = sorted(
    [
        ROOT,
        *(path.parent for path in ROOT.glob("plugins/*/pyproject.toml")),
        ROOT / "examples/oml_plugin_example",
    ]
)
#: What the copy of a project leaves out: build outputs of an earlier build.
IGNORED = shutil.ignore_patterns("*.egg-info", "__pycache__", "build", "dist")

pytestmark = pytest.mark.slow  # twelve builds take about 25 seconds


def project_table(project_dir: Path) -> dict:
    """The ``[project]`` and ``[tool.setuptools]`` tables of ``project_dir``'s pyproject.toml, merged."""
    pyproject = tomllib.loads((project_dir / "pyproject.toml").read_text())
    return {**pyproject["project"], "setuptools": pyproject["tool"]["setuptools"]}


def packages_of(project_dir: Path) -> list[str]:
    """The top-level packages of the project, its own first (``include = ["oml_core*", "hydra_plugins*"]`` ->
    ``["oml_core", "hydra_plugins"]``: oml-core also ships hydra's plugins of OML's config groups)."""
    return [
        pattern.rstrip("*")
        for pattern in project_table(project_dir)["setuptools"]["packages"]["find"]["include"]
    ]


def package_of(project_dir: Path) -> str:
    """The project's own package, the one its package data is declared for (``oml_models``)."""
    return packages_of(project_dir)[0]


def copy_project(project_dir: Path, destination: Path) -> Path:
    """A copy of what a build of ``project_dir`` reads: its top-level files, its package and its ``tests``
    folder (copied so that the test sees the wheel leave them out); never another project or a virtualenv."""
    destination.mkdir()
    for path in project_dir.iterdir():
        if path.is_file():
            shutil.copy2(path, destination / path.name)
    for folder in (*packages_of(project_dir), "tests"):
        if (project_dir / folder).is_dir():
            shutil.copytree(project_dir / folder, destination / folder, ignore=IGNORED)
    return destination


def build_wheel(project_dir: Path, out: Path) -> Path:
    """Build the wheel of a copy of ``project_dir`` into ``out`` offline, and return its path."""
    copy = copy_project(project_dir, out / "src")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "-w",
            str(out / "wheels"),
            str(copy),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = (out / "wheels").glob("*.whl")
    return wheel


@pytest.mark.parametrize("project_dir", PROJECTS, ids=lambda path: project_table(path)["name"])
def test_the_wheel_ships_configs_and_py_typed_and_no_tests(project_dir: Path, tmp_path: Path) -> None:
    project = project_table(project_dir)
    package = package_of(project_dir)
    with zipfile.ZipFile(build_wheel(project_dir, tmp_path)) as wheel:
        names = set(wheel.namelist())
        (metadata,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        metadata_text = wheel.read(metadata).decode()

    # the package data its pyproject declares (default configs, templates, a page) is in the wheel
    package_data = {
        path.relative_to(project_dir).as_posix()
        for pattern in project["setuptools"]["package-data"][package]
        for path in (project_dir / package).glob(pattern)
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert f"{package}/py.typed" in package_data, f"{package} does not declare py.typed"
    assert sorted(package_data - names) == [], "package data missing from the wheel"
    configs = {path for path in package_data if path.startswith(f"{package}/configs/")}
    # oml-serve (with its page) and oml-ray are a command each, with no default configs
    assert configs or package in ("oml_serve", "oml_ray"), f"{package} has no default configs"
    tests = sorted(
        n
        for n in names
        if "tests" in PurePosixPath(n).parts[:-1] or fnmatch(PurePosixPath(n).name, "test_*.py")
    )
    assert tests == []
    folders = tuple(f"{name}/" for name in packages_of(project_dir))
    assert all(n.startswith((*folders, metadata.rpartition("/")[0] + "/")) for n in names), sorted(names)
    if "hydra_plugins" in packages_of(project_dir):  # a namespace package shared with other hydra plugins
        assert "hydra_plugins/__init__.py" not in names
        assert {
            "hydra_plugins/oml_configs/search_path.py",
            "hydra_plugins/oml_configs/config_source.py",
        } <= names

    if package == "oml_core":  # OML's module paths: the files of compat's tree (folders without __init__.py)
        tree = {f"oml_core/compat/oml_paths/{file}" for file in oml_path_files()}
        assert sorted(tree - names) == [] and "oml_core/utils/oml_path_folders.py" in names

    assert f"Name: {project['name']}\n" in metadata_text
    assert project["license"] == "Apache-2.0"  # an SPDX expression (PEP 639), not the deprecated table
    assert "License-Expression: Apache-2.0\n" in metadata_text
    license_files = sorted(path.name for path in project_dir.glob("LICEN[CS]E*"))
    for name in license_files:
        assert f"{metadata.rpartition('/')[0]}/licenses/{name}" in names
    if project.get("readme"):
        readme = (project_dir / project["readme"]).read_text()
        assert readme.splitlines()[0] in metadata_text  # the long description is the README
