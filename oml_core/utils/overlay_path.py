"""A folder read through several folders: OML's ``CONFIGS_PATH`` (:data:`oml_core.const.CONFIGS_PATH`).

OML keeps every component's default config in one folder, ``oml/configs/<group>/<name>.yaml``; oml keeps the
core's there and each plugin's in the plugin (its config dir). An :class:`OverlayPath` joins them into one
path-like folder, so that ``OmegaConf.load(CONFIGS_PATH / "extractor" / "vit.yaml")`` finds the oml-models
plugin's file::

    configs = OverlayPath(Path("oml_core/configs"))
    configs.search_also(lambda: [Path("oml_losses/configs")], aliases={"criterion": "loss"})
    configs / "optimizer" / "adam.yaml"   # Path("oml_core/configs/optimizer/adam.yaml"): the base folder first
    configs / "criterion" / "arcface.yaml"  # Path("oml_losses/configs/loss/arcface.yaml")
    configs / "criterion" / "nope.yaml"   # Path("oml_core/configs/criterion/nope.yaml"): none has it
    os.fspath(configs)                    # "oml_core/configs"

The contract of ``overlay / relative`` (``relative`` a string or path of one or more parts):

- the first part of the overlay's relative path is read through ``aliases`` (OML's group name to oml's);
- the first folder, in order (the base folder, then those of the sources in the order they were added), where
  the relative path is a file gives that file, a ``Path`` (or the ``Traversable`` of a plugin installed as a
  zip);
- else, if a folder holds it as a folder, the result is another :class:`OverlayPath` (joining further searches
  every folder again);
- else the result is the plain ``Path`` of the base folder joined with ``relative`` as written: it does not
  exist, so opening it raises ``FileNotFoundError`` naming that path (where OML would have had the file);
- an absolute ``relative`` gives ``Path(relative)``, as ``Path`` does.

``os.fspath()`` and ``str()`` of an overlay give the first folder that holds its relative path as a folder (the
base folder's own when it has one; the base folder itself for the root), so ``Path(overlay)`` and code that
wants a plain folder (hydra's ``config_path=str(CONFIGS_PATH)``) keep the base folder. ``is_dir()``,
``exists()``, ``is_file()``, ``iterdir()`` (every folder's entries, merged by name) and ``name`` read the
overlay; for any other ``Path`` operation use ``Path(overlay)``.

The sources are callables asked on each lookup, so a source can compute its folders lazily (the plugins'
config dirs are found by loading the registry, on the first lookup only).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path, PurePath
from typing import Any

#: A source of extra folders: called on each lookup, it returns the folders (``Path`` or ``Traversable``).
FolderSource = Callable[[], Iterable[Any]]


class _Search:
    """What every overlay made from one root searches: its sources and the aliases of a first part."""

    def __init__(self) -> None:
        self.sources: list[FolderSource] = []
        self.aliases: dict[str, str] = {}


class OverlayPath(os.PathLike[str]):
    """The folder ``base / relative`` read through the folders of the sources added with :meth:`search_also`
    (see the module's docstring for the contract).

    Args:
        base: The first folder searched, and the one whose path ``os.fspath`` gives.
    """

    def __init__(self, base: str | os.PathLike[str]) -> None:
        self.base = Path(base)
        #: The parts joined to the base folder (none for the root).
        self.relative: tuple[str, ...] = ()
        self._search = _Search()

    def _at(self, relative: tuple[str, ...]) -> OverlayPath:
        """The overlay of ``relative`` that searches as this one does."""
        child = OverlayPath(self.base)
        child.relative, child._search = relative, self._search
        return child

    def search_also(self, source: FolderSource, *, aliases: Mapping[str, str] | None = None) -> None:
        """Search the folders that ``source()`` returns after the base folder (and after the sources added
        before), in every overlay made from this one; ``aliases`` maps a first part to the folder name it is
        read as in every folder (``{"criterion": "loss"}``). Adding the same source again changes nothing."""
        if source not in self._search.sources:
            self._search.sources.append(source)
        self._search.aliases.update(aliases or {})

    def folders(self) -> list[Any]:
        """Every folder searched, in order: the base folder, then each source's (a folder given twice once)."""
        found: list[Any] = [self.base]
        for source in self._search.sources:
            found.extend(folder for folder in source() if folder not in found)
        return found

    def _candidates(self, relative: tuple[str, ...]) -> Iterator[Any]:
        """``relative``, its first part read through the aliases, under every folder, in order."""
        if relative:
            relative = (self._search.aliases.get(relative[0], relative[0]), *relative[1:])
        for folder in self.folders():
            candidate = folder
            for part in relative:
                candidate = candidate / part
            yield candidate

    def __truediv__(self, other: str | os.PathLike[str]) -> Any:
        joined = PurePath(other)
        if joined.is_absolute():
            return Path(joined)
        relative = (*self.relative, *joined.parts)
        candidates = list(self._candidates(relative))
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        if any(candidate.is_dir() for candidate in candidates):
            return self._at(relative)
        return self.base.joinpath(*relative)

    def __fspath__(self) -> str:
        for candidate in self._candidates(self.relative):
            if candidate.is_dir():
                return str(candidate)
        return str(self.base.joinpath(*self.relative))

    def __str__(self) -> str:
        return self.__fspath__()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__fspath__()!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OverlayPath):
            return NotImplemented
        return (self.base, self.relative, self._search) == (other.base, other.relative, other._search)

    def __hash__(self) -> int:
        return hash((self.base, self.relative))

    @property
    def name(self) -> str:
        """The last part of the path, as ``Path.name``."""
        return self.relative[-1] if self.relative else self.base.name

    def is_dir(self) -> bool:
        """Whether a folder holds the relative path as a folder."""
        return any(candidate.is_dir() for candidate in self._candidates(self.relative))

    def exists(self) -> bool:
        """As :meth:`is_dir`: an overlay is a folder."""
        return self.is_dir()

    def is_file(self) -> bool:
        """``False``: an overlay is a folder (a file is returned as a ``Path`` by ``/``)."""
        return False

    def iterdir(self) -> Iterator[Any]:
        """The entries of every folder, once per name, in the order of the folders, each as ``self / name``
        gives it (a file of the first folder that has it, or an overlay)."""
        seen: set[str] = set()
        for candidate in self._candidates(self.relative):
            if not candidate.is_dir():
                continue
            for entry in sorted(candidate.iterdir(), key=lambda entry: entry.name):
                if entry.name not in seen:
                    seen.add(entry.name)
                    yield self / entry.name


__all__ = ["FolderSource", "OverlayPath"]
