"""OML's module paths that have no module of their own in the core (``OML_MODULES``) are files of the tree
``oml_core/compat/oml_paths/``, found through the ``__path__`` of ``oml_core`` and of the core packages that hold
them; ``import oml_core`` installs no import hook and imports nothing of ``oml_core.compat``, and no core module
imports it (its faces name OML's names there lazily, imported when an OML name is asked for)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import oml_core
from oml_core.compat.modules import OML_MODULES
from oml_core.compat.tree import core_packages_with_oml_paths, oml_path_file, oml_path_files
from oml_core.utils.oml_path_folders import OML_PATHS_ROOT, oml_paths_folder
from tests.scripts.oml_paths import UPDATE_HINT, tree_files

CORE = Path(oml_core.__file__).parent
#: The line of a core package's ``__init__.py`` that puts its folder of the tree on its ``__path__``.
PATH_LINE = "__path__.append(oml_paths_folder(__name__))"


def test_the_tree_holds_a_file_per_oml_path_written_from_the_table():
    assert tree_files() == oml_path_files(), UPDATE_HINT
    assert len(oml_path_files()) == len(OML_MODULES)


def test_a_path_with_paths_under_it_is_a_package():
    assert oml_path_file("losses") == "losses/__init__.py"
    assert oml_path_file("losses.triplet") == "losses/triplet.py"
    assert oml_path_file("registry.models") == "registry/models.py"
    assert oml_path_file("models.audio.ecapa_tdnn") == "models/audio/ecapa_tdnn/__init__.py"


def test_every_oml_path_is_its_file_of_the_tree():
    """Python finds each path in the tree: its parent package has the tree's folder on its ``__path__``, and no
    real module of the core has the path (a real module would win, and the file would be dead)."""
    found = {path: importlib.util.find_spec(f"oml_core.{path}") for path in OML_MODULES}
    wrong = {
        path: spec.origin if spec else None
        for path, spec in found.items()
        if spec is None or spec.origin != os.path.join(OML_PATHS_ROOT, *oml_path_file(path).split("/"))
    }
    assert wrong == {}


def test_exactly_the_core_packages_that_hold_oml_paths_put_the_tree_on_their_path():
    with_line = sorted(
        ".".join(("oml_core", *path.parent.relative_to(CORE).parts))
        for path in CORE.rglob("__init__.py")
        if "compat" not in path.relative_to(CORE).parts and PATH_LINE in path.read_text(encoding="utf-8")
    )
    needed = core_packages_with_oml_paths()
    assert with_line == needed, (
        f"the __init__.py of each of {needed} (and no other) has the line `{PATH_LINE}` "
        "(from oml_core.utils.oml_path_folders import oml_paths_folder)"
    )
    assert {"oml_core", "oml_core.registry", "oml_core.lightning.pipelines"} <= set(needed)
    for package in needed:
        path = importlib.import_module(package).__path__
        assert list(path)[-1] == oml_paths_folder(package) and os.path.isdir(list(path)[0]), package


def test_no_core_module_imports_the_compatibility_package():
    """No import statement outside ``compat/`` names it, at module level or in a function (OML's names of a core
    module that live there are lazy exports, imported when asked for)."""
    importing = []
    for path in sorted(CORE.rglob("*.py")):
        if path.relative_to(CORE).parts[0] == "compat":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            importing += [f"{path.relative_to(CORE)}: {n}" for n in names if n.startswith("oml_core.compat")]
    assert importing == []


#: Run in a fresh interpreter: ``import oml_core``, then the core's faces that export OML names lazily and the
#: ``oml`` program, then OML's paths.
FRESH_INTERPRETER = """
import json, sys
hooks = (list(sys.meta_path), list(sys.path_hooks))
import oml_core
report = {"hooks_unchanged": (list(sys.meta_path), list(sys.path_hooks)) == hooks}
import oml_core.cli, oml_core.const, oml_core.datasets, oml_core.datasets.pairs, oml_core.inference
import oml_core.lightning, oml_core.registry, oml_core.retrieval, oml_core.utils
report["compat_before"] = sorted(m for m in sys.modules if m.startswith("oml_core.compat"))
report["core_finders"] = [
    repr(f) for f in [*sys.meta_path, *sys.path_hooks] if getattr(f, "__module__", "").startswith("oml_core")
]
from oml_core.losses.triplet import TripletLossWithMiner
from oml_core.registry.models import EXTRACTORS_REGISTRY
from oml_core.const import CONFIGS_PATH
from oml_core.datasets.pairs import PairDataset
import oml_losses, oml_postprocessors
report["oml_paths"] = [
    TripletLossWithMiner is oml_losses.TripletLossWithMiner,
    "resnet" in EXTRACTORS_REGISTRY,
    (CONFIGS_PATH / "criterion" / "triplet_with_miner.yaml").is_file(),
    PairDataset is oml_postprocessors.PairDataset,
]
report["compat_after"] = "oml_core.compat.modules" in sys.modules
print(json.dumps(report))
"""


def test_import_oml_core_installs_no_hook_and_imports_no_compat_until_an_oml_path_is_asked_for():
    done = subprocess.run(
        [sys.executable, "-c", FRESH_INTERPRETER], capture_output=True, text=True, check=True, timeout=300
    )
    report = json.loads(done.stdout.splitlines()[-1])
    assert report == {
        "hooks_unchanged": True,
        "compat_before": [],
        "core_finders": [],
        "oml_paths": [True, True, True, True],
        "compat_after": True,
    }
