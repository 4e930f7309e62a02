"""What every distribution of the repository declares: the hook API is 0.x, so each plugin bounds its oml
dependencies below the next minor version; the project is Apache-2.0, as OML, with the license text at the root;
every project installs editable warning-free."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).parents[1]
PLUGIN_PROJECTS = sorted(
    [*ROOT.glob("plugins/*/pyproject.toml"), ROOT / "examples/oml_plugin_example/pyproject.toml"]
)


def test_every_plugin_bounds_its_oml_dependencies_below_the_next_minor_version():
    core_version = Version(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
    assert len(PLUGIN_PROJECTS) == 13
    for path in PLUGIN_PROJECTS:
        project = tomllib.loads(path.read_text())["project"]
        oml = [Requirement(r) for r in project["dependencies"] if r.startswith("oml-")]
        assert any(r.name == "oml-core" for r in oml), path
        for requirement in oml:
            assert core_version in requirement.specifier, (path, str(requirement))
            assert Version(f"{core_version.major}.{core_version.minor + 1}") not in requirement.specifier, (
                path
            )
        assert project["license"] == "Apache-2.0", path  # an SPDX expression (PEP 639)


def test_the_license_is_the_apache_2_text():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert text.rstrip().endswith("END OF TERMS AND CONDITIONS")


def test_every_project_installs_editable_as_a_simple_layout_without_a_warning(tmp_path):
    """setuptools installs a flat project editable through an import-hook finder and prints an "Editable
    installation" notice for it, unless the project declares its root as the package dir (the "simple layout":
    one ``.pth`` line). Every project declares it, and building one editable wheel raises no warning at all."""
    for path in [ROOT / "pyproject.toml", *PLUGIN_PROJECTS]:
        setuptools = tomllib.loads(path.read_text())["tool"]["setuptools"]
        assert setuptools["package-dir"] == {"": "."}, path
        for pattern in setuptools["packages"]["find"]["include"]:
            assert (path.parent / pattern.rstrip("*")).is_dir(), (
                path,
                pattern,
            )  # the packages sit at the root
    project = tmp_path / "oml_losses"
    shutil.copytree(
        ROOT / "plugins/oml_losses", project, ignore=shutil.ignore_patterns("*.egg-info", "tests")
    )
    build = "import setuptools.build_meta as b, sys; print(b.build_editable(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", build, str(tmp_path / "wheel")],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith(".whl")
