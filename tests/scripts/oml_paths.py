"""The tree ``oml_core/compat/oml_paths/`` written from ``OML_MODULES`` (:func:`oml_core.compat.tree.oml_path_files`):
a forwarding file per OML path, and no other file. It is generated, never edited by hand
(``tests/test_oml_paths.py`` fails when it differs). Rewrite it from the repository's root::

    python -m tests.scripts.oml_paths
"""

from __future__ import annotations

import shutil
from pathlib import Path

from oml_core.compat.tree import oml_path_files
from oml_core.utils.oml_path_folders import OML_PATHS_ROOT

ROOT = Path(OML_PATHS_ROOT)
#: How ``tests/test_oml_paths.py`` tells to update the tree.
UPDATE_HINT = "run `python -m tests.scripts.oml_paths` from the repository's root"


def tree_files() -> dict[str, str]:
    """``{file relative to the tree's root, with '/': its text}`` of every file now in the tree (caches aside)."""
    return {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(ROOT.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def write_tree() -> None:
    """Write every file of :func:`oml_path_files` that differs, remove every other file and every empty folder."""
    wanted = oml_path_files()
    for relative in set(tree_files()) - set(wanted):
        (ROOT / relative).unlink()
    for relative, text in wanted.items():
        path = ROOT / relative
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for folder in sorted(
        (p for p in ROOT.rglob("*") if p.is_dir() and p.name != "__pycache__"), reverse=True
    ):
        if all(entry.name == "__pycache__" for entry in folder.iterdir()):
            shutil.rmtree(folder)  # a folder no path needs any more (its caches with it)


if __name__ == "__main__":
    write_tree()
    print(f"wrote {ROOT}")
