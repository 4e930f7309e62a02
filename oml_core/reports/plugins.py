"""What ``oml plugins`` shows (the rows of :mod:`oml_core.registry.plugin_rows` or of
:func:`~oml_core.registry.isolation.check_plugins`, as a table or JSON, and the verdict of ``--check``) and what
``oml plugin new`` says it wrote."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oml_core.registry.registry import EVERY_RUN_KIND
from oml_core.reports.answer import Answer

#: The table of no plugin.
NO_PLUGINS = "No oml plugins installed (see `pip install oml-models oml-losses ...`)."


@dataclass(frozen=True)
class PluginsAnswer(Answer):
    """The plugins' rows (``{"name", "distribution", "version", "hooks", "provides", "every_run", "shadowed",
    "error"}``, and ``"broken"`` when checked: see :mod:`oml_core.registry.plugin_rows`), in load order;
    ``checked``: whether each plugin was loaded and its components imported (``oml plugins --check``), which gives
    the answer a :meth:`verdict` (a shadowed name is no problem). Its JSON is the list of rows."""

    rows: list[dict[str, Any]]
    checked: bool = False

    def as_data(self) -> list[dict[str, Any]]:
        """The rows (``oml plugins --format json``)."""
        return self.rows

    def as_text(self) -> str:
        """The table: per plugin a line ``name  [distribution version]``, its error (``FAILED: ...``), a line per
        kind it provides (callbacks added to every run marked ``(every run)``), its broken components
        (``BROKEN: ...``), the names of it that a first-party plugin gives too (``SHADOWED: optimizer 'adam'
        builds oml-core's; this plugin's is acme:adam``)."""
        if not self.rows:
            return NO_PLUGINS
        lines = []
        for row in self.rows:
            version = f" {row['version']}" if row["version"] else ""
            lines.append(f"{row['name']}  [{row['distribution'] or 'in code'}{version}]")
            if row["error"]:
                lines.append(f"    FAILED: {row['error']}")
            every_run = set(row["every_run"])
            for kind, names in row["provides"].items():
                shown = [
                    f"{n} (every run)" if kind == EVERY_RUN_KIND and n in every_run else n for n in names
                ]
                lines.append(f"    {kind:<16} {', '.join(shown)}")
            for name in row.get("shadowed", []):
                lines.append(
                    f"    SHADOWED: {name['kind']} {name['name']!r} builds {name['by']}'s; this plugin's is "
                    f"{name['qualified']}"
                )
            for problem in row.get("broken", []):
                lines.append(f"    BROKEN: {problem}")
        return "\n".join(lines)

    def verdict(self) -> tuple[bool, str]:
        """Whether every plugin of a checked answer loads with all its components, and the last line of ``oml
        plugins --check``: ``OK: 7 plugins, 123 components load`` or ``FAILED: 2 problems in 1 plugin (see
        above)``, a problem being a plugin that does not load (or is refused) or a component that does not import;
        two distributions' rows of one name are two plugins."""
        problems = [int(bool(row["error"])) + len(row.get("broken", [])) for row in self.rows]
        failed = [count for count in problems if count]
        if failed:
            return (
                False,
                f"FAILED: {_count(sum(failed), 'problem')} in {_count(len(failed), 'plugin')} (see above)",
            )
        components = sum(len(names) for row in self.rows for names in row["provides"].values())
        return True, f"OK: {_count(len(self.rows), 'plugin')}, {_count(components, 'component')} load"


@dataclass(frozen=True)
class PluginWritten(Answer):
    """A plugin distribution written by ``oml plugin new``: its name, its folder and its files (relative to the
    folder, sorted)."""

    name: str
    folder: str
    files: list[str]

    def as_text(self) -> str:
        """Where it was written, its files, and what to do next (install, test, list)."""
        lines = [f"Plugin {self.name!r} written to {self.folder}:", *(f"  {name}" for name in self.files)]
        lines.append(
            f"Next: pip install -e {shlex.quote(f'{self.folder}[test]')}; pytest {shlex.quote(self.folder)}; "
            "oml plugins"
        )
        return "\n".join(lines)


def plugin_written(name: str, folder: Path) -> PluginWritten:
    """The answer of ``oml plugin new NAME`` that wrote ``folder``: its files as they are now."""
    files = sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file())
    return PluginWritten(name=name, folder=str(folder), files=files)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


__all__ = ["NO_PLUGINS", "PluginWritten", "PluginsAnswer", "plugin_written"]
