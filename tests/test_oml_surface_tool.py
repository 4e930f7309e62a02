"""benchmarks/oml_suite/surface.py on a small hand-written "OML" tree: which modules and names it finds, which of
them resolve under oml_core, and which signature differences it reports (each written into the tree on purpose)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "oml_suite" / "surface.py"


@pytest.fixture(scope="module")
def surface() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("oml_surface_tool", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / "oml" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


TREE = {
    "__init__.py": "",
    # a package without __all__: what it imports from OML is public
    "utils/__init__.py": "from oml.utils.misc import one_hot\nfrom typing import Any\n",
    "utils/misc.py": """
        __all__ = ["one_hot", "find_value_ids", "set_global_seed", "flatten_dict", "not_in_oml"]

        def one_hot(i, dim):  # as oml's
            pass

        def find_value_ids(value, it):  # oml's order is (it, value)
            pass

        def set_global_seed(seed=0, *, deterministic=True):  # oml requires seed, has no `deterministic`
            pass

        def flatten_dict(d, parent_key="", sep="."):  # oml's sep is "/"
            pass

        def not_in_oml():
            pass
    """,
    # no __all__: top-level defs, classes and assignments, not imports, not private names
    "utils/misc_torch.py": """
        import torch
        from oml.utils.misc import one_hot
        EPS = 1e-6
        _PRIVATE = 1

        class Base:
            def __init__(self, input_dict=None):
                pass

        class OnlineDict(Base):  # its __init__ is Base's
            pass

        def normalise(x, p=2):
            pass

        def _helper():
            pass
    """,
    "no_such_module.py": "def anything():\n    pass\n",
    "_private_module.py": "def hidden():\n    pass\n",
    "configs/__init__.py": "X = 1\n",
}


def test_finds_oml_modules_and_names_by_parsing(surface: ModuleType, tmp_path: Path) -> None:
    modules = surface.parse_tree(write_tree(tmp_path, TREE))
    assert sorted(modules) == ["", "no_such_module", "utils", "utils.misc", "utils.misc_torch"]
    assert modules["utils"].public == ["one_hot"]
    assert modules["utils.misc"].public == [
        "one_hot",
        "find_value_ids",
        "set_global_seed",
        "flatten_dict",
        "not_in_oml",
    ]
    assert modules["utils.misc_torch"].public == ["EPS", "Base", "OnlineDict", "normalise"]


def test_reports_missing_modules_names_and_signature_differences(surface: ModuleType, tmp_path: Path) -> None:
    modules = surface.parse_tree(write_tree(tmp_path, TREE))
    measured = surface.measure(modules)
    assert measured.modules_found == ["", "utils", "utils.misc", "utils.misc_torch"]
    assert [m for m, _ in measured.modules_missing] == ["no_such_module"]
    assert [(m, n) for m, n, _ in measured.names_missing] == [
        ("no_such_module", "anything"),
        ("utils", "one_hot"),  # oml_core.utils does not re-export it
        ("utils.misc", "not_in_oml"),
        ("utils.misc_torch", "EPS"),
        ("utils.misc_torch", "Base"),
    ]
    assert measured.names_found == 6
    # one_hot, find_value_ids, set_global_seed, flatten_dict, OnlineDict (Base's __init__), normalise
    assert measured.compared == 6
    assert sorted(measured.differences) == [
        ("utils.misc", "find_value_ids", "position 0: OML's 'value', oml has 'it' there"),
        ("utils.misc", "find_value_ids", "position 1: OML's 'it', oml has 'value' there"),
        ("utils.misc", "flatten_dict", "OML's 'sep' defaults to '.', oml's to '/'"),
        ("utils.misc", "set_global_seed", "OML's 'deterministic': oml has no such parameter"),
        ("utils.misc", "set_global_seed", "OML's 'seed' defaults to 0, oml requires it"),
    ]


def test_expected_gaps_are_listed_apart(
    surface: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    root = write_tree(tmp_path, TREE)
    expected = tmp_path / "expected.tsv"
    expected.write_text(
        "# module, name, reason\nno_such_module\t*\tnot in oml on purpose\n"
        "utils.misc\tflatten_dict\toml's separator\n",
        encoding="utf-8",
    )
    missing, differences = tmp_path / "missing.tsv", tmp_path / "differences.tsv"
    surface.main(
        [str(root), "--expected", str(expected), "--missing", str(missing), "--differences", str(differences)]
    )
    assert missing.read_text(encoding="utf-8").splitlines() == [
        "utils\tone_hot",
        "utils.misc\tnot_in_oml",
        "utils.misc_torch\tEPS",
        "utils.misc_torch\tBase",
    ]
    assert [line.split("\t")[1] for line in differences.read_text(encoding="utf-8").splitlines()] == [
        "find_value_ids",
        "find_value_ids",
        "set_global_seed",
        "set_global_seed",
    ]
    printed = capsys.readouterr().out
    assert "no_such_module.anything" not in printed  # expected: counted, not listed
    assert "oml.utils.misc.not_in_oml" in printed


def test_a_bad_expected_line_names_file_and_line(surface: ModuleType, tmp_path: Path) -> None:
    expected = tmp_path / "expected.tsv"
    expected.write_text("utils.misc\tone_hot\n", encoding="utf-8")
    with pytest.raises(
        SystemExit, match=r"expected.tsv:1: expected module<TAB>name<TAB>reason, got 2 fields"
    ):
        surface.load_expected(str(expected))


def test_a_folder_without_oml_is_refused(surface: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no oml/ package"):
        surface.parse_tree(tmp_path)
