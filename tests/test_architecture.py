"""``docs/architecture.md`` says how the core is layered: every package on a floor, importing only packages on
its own floor or below. This reads every import of every core module (function-local ones too) and holds the
code to that table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import oml_core

CORE = Path(oml_core.__file__).parent
DOC = Path(__file__).parents[1] / "docs" / "architecture.md"


def floors_of_the_doc() -> dict[str, int]:
    """``{package or module: floor}`` of the table "The packages, bottom to top" (``utils``, ``compose.py``)."""
    floors = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        row = re.match(r"^\| (\d+) \| ([^|]+) \|", line)
        if row:
            for name in re.findall(r"`([\w.]+)/?`", row.group(2)):
                floors[name] = int(row.group(1))
    return floors


def part_of(module: str) -> str:
    """The package (``registry``) or top-level module (``compose.py``) of ``oml_core.<...>``."""
    first = module.split(".")[1]
    return first if (CORE / first).is_dir() else f"{first}.py"


def imported_modules(source: str, package: str) -> tuple[set[str], set[str]]:
    """``(run time, type only)``: every module that the code ``source`` of a module of ``package`` imports,
    wherever the import statement is (function-local ones too; relative imports resolved); ``type only`` holds
    those of an ``if TYPE_CHECKING:`` block, imported for annotations only (not dependencies). ``from m import
    x`` counts as ``m``."""
    run_time: set[str] = set()
    type_only: set[str] = set()
    tree = ast.parse(source)
    annotations_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        found = type_only if id(node) in annotations_only else run_time
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            else:
                found.add(node.module or "")
    return run_time, type_only


def core_imports(source: str, package: str) -> set[str]:
    """Every ``oml_core.*`` module that the code ``source`` of a module of ``package`` imports at run time
    (:func:`imported_modules`)."""
    return {module for module in imported_modules(source, package)[0] if module.startswith("oml_core.")}


def package_of(path: Path) -> str:
    """``oml_core.utils`` for ``oml_core/utils/images.py``."""
    return ".".join(("oml_core", *path.relative_to(CORE).parts[:-1]))


def test_the_table_names_every_package_and_top_level_module_once():
    floors = floors_of_the_doc()
    parts = {p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    parts |= {p.name for p in CORE.glob("*.py") if p.name != "__init__.py"}
    assert set(floors) == parts - {"configs"}  # the default yaml files import nothing


def test_every_import_goes_to_the_same_floor_or_below():
    floors = floors_of_the_doc()
    upward = []
    for path in sorted(CORE.rglob("*.py")):
        if path.parent == CORE and path.name == "__init__.py":
            continue  # the package's face: it imports what it exports
        here = part_of(".".join(("oml_core", *path.relative_to(CORE).with_suffix("").parts)))
        for module in core_imports(path.read_text(encoding="utf-8"), package_of(path)):
            there = part_of(module)
            if floors[there] > floors[here]:
                upward.append(
                    f"{path.relative_to(CORE)} -> {module} (floor {floors[here]} -> {floors[there]})"
                )
    assert upward == []


def test_the_check_sees_local_and_relative_imports():
    source = (
        "import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from oml_core.metrics import x\n\n"
        "def f():\n    from oml_core.cli import main\n    from ..index import gallery\n"
    )
    assert core_imports(source, "oml_core.utils") == {"oml_core.cli", "oml_core.index"}
    assert (
        part_of("oml_core.cli") == "cli"
        and part_of("oml_core.const") == "const.py"
        and part_of("oml_core.index.gallery") == "index"
    )


#: What a module of ``interfaces/`` may import at run time, at module level or in a function (a module or its
#: submodules): the ABC and typing machinery of the standard library, torch, and other interfaces.
INTERFACE_IMPORTS = (
    "__future__",
    "abc",
    "typing",
    "collections.abc",
    "dataclasses",
    "torch",
    "oml_core.interfaces",
)
#: The exceptions, each named: ``IPipelineLogger`` is a Lightning ``Logger``, as OML's is.
INTERFACE_EXCEPTIONS = {"loggers.py": {"pytorch_lightning.loggers"}}


def is_within(module: str, packages: tuple[str, ...] | set[str]) -> bool:
    """Whether ``module`` is one of ``packages`` or a submodule of one."""
    return any(module == package or module.startswith(f"{package}.") for package in packages)


def test_interfaces_import_only_torch_typing_and_other_interfaces():
    outside = []
    for path in sorted((CORE / "interfaces").rglob("*.py")):
        run_time, type_only = imported_modules(path.read_text(encoding="utf-8"), package_of(path))
        allowed = (*INTERFACE_IMPORTS, *INTERFACE_EXCEPTIONS.get(path.name, ()))
        outside += [f"{path.name}: {module}" for module in sorted(run_time) if not is_within(module, allowed)]
        # annotations may name numpy or matplotlib, never the rest of the core
        outside += [
            f"{path.name}: {module} (type only)"
            for module in sorted(type_only)
            if is_within(module, ("oml_core",)) and not is_within(module, ("oml_core.interfaces",))
        ]
    assert outside == []


def test_the_interface_check_sees_local_relative_and_type_only_imports():
    source = (
        "from __future__ import annotations\nfrom typing import TYPE_CHECKING\nimport torch.nn\n"
        "if TYPE_CHECKING:\n    import numpy as np\n    from oml_core.zoo import entry\n\n"
        "def f():\n    from oml_core.zoo.store import get_pretrained\n    from .datasets import IBaseDataset\n"
    )
    run_time, type_only = imported_modules(source, "oml_core.interfaces")
    assert run_time == {
        "__future__",
        "typing",
        "torch.nn",
        "oml_core.zoo.store",
        "oml_core.interfaces.datasets",
    }
    assert type_only == {"numpy", "oml_core.zoo"}
    assert [m for m in sorted(run_time) if not is_within(m, INTERFACE_IMPORTS)] == ["oml_core.zoo.store"]
