"""The metrics, retrieval and functional modules and the embeddings datasets import without the heavy libraries
that only some features need: Lightning, hydra/omegaconf, matplotlib (drawing), torchvision (transforms), pandas
and PIL (dataframes and images)."""

from __future__ import annotations

import json
import subprocess
import sys

#: Modules that importing the light parts of the core must leave out of ``sys.modules``.
HEAVY = (
    "pytorch_lightning",
    "lightning",
    "lightning_fabric",
    "hydra",
    "omegaconf",
    "matplotlib",
    "torchvision",
    "pandas",
    "PIL",
)
LIGHT = (
    "oml_core.metrics",
    "oml_core.retrieval",
    "oml_core.functional",
    "oml_core.functional.metrics",
    "oml_core.datasets.embeddings",
)


def imported_after(*modules: str) -> list[str]:
    """The :data:`HEAVY` top-level packages in ``sys.modules`` of a fresh interpreter after importing ``modules``."""
    code = (
        f"import importlib, json, sys; [importlib.import_module(m) for m in {list(modules)!r}]; "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(done.stdout)


def test_the_light_modules_import_none_of_the_heavy_libraries():
    """One interpreter imports them all (what any one of them imports is then in ``sys.modules``); a failure
    names each module at fault, checked in an interpreter of its own."""
    found = imported_after(*LIGHT)
    at_fault = {module: imported_after(module) for module in LIGHT} if found else {}
    assert found == [], at_fault


def test_the_check_sees_a_heavy_import():
    assert imported_after("oml_core.metrics", "oml_core.utils.images") == ["PIL"]
