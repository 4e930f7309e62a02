"""Plugins vetted before a command imports them: a plugin that exits, hangs or fails never takes the command along.

In-process loading cannot survive a plugin that calls ``os._exit`` or hangs, so a command (every ``oml`` command
runs under :class:`PluginVetting`, see :func:`~oml_core.registry.manager.guarded_loading`) knows which plugins are
healthy before it imports any. Each plugin's verdict is looked up by its fingerprint in the verdicts kept in the
user cache folder (:mod:`oml_core.registry.verdicts`); the plugins without one (the first command after a plugin
is installed, upgraded or edited) are loaded, their hooks called, each in a child process of its own, in parallel
(:func:`~oml_core.registry.isolation.run_children`, without their components: the children import neither torch
nor the components), and their verdicts kept. A command whose plugins all have verdicts starts no process.

A plugin that failed its check is not imported: the registry reports it as a broken plugin (``oml plugin x
(x-plugin 0.3): exited with status 3 during import (skipped; set OML_STRICT_PLUGINS=1 to raise)``, or that line as
the command's error when strict) and the command goes on without it.

A plugin that passed its check may still hang in the command's own process (it hangs at random, or only there):
a step of loading it that runs for more than the time limit ends the command with one line, because a thread
cannot stop a running import or hook; its verdict becomes the hang, so that the next commands skip it.
``oml plugins --check`` checks every plugin again and replaces the verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from oml_core.registry.entry import PluginInfo
from oml_core.registry.isolation import default_jobs, run_children
from oml_core.registry.manager import FoundPlugin, slow_seconds_from_env
from oml_core.registry.verdicts import fingerprint, read_verdicts, store_verdicts, verdicts_path


@dataclass
class PluginVetting:
    """The :class:`~oml_core.registry.manager.LoadingGuard` of a command.

    Attributes:
        timeout: The seconds one step of loading a plugin may take, in its check and in the command.
        end: Ends the command with its one-line message when a plugin hangs in the command's own process (the
            CLI prints it and ends the process); it never returns.
        jobs: The checks run at once (default: :func:`~oml_core.registry.isolation.default_jobs`).
    """

    timeout: float
    end: Callable[[str], NoReturn]
    jobs: int | None = None
    _verdicts: dict[str, str | None] = field(default_factory=dict)  # by fingerprint, read or checked
    _vetted: dict[PluginInfo, FoundPlugin] = field(default_factory=dict)

    def vet(self, plugins: Sequence[FoundPlugin]) -> Mapping[PluginInfo, str | None]:
        """The verdict of each of ``plugins``: the kept one, else the one its check in a child process gives now
        (then kept, unless the child failed before the plugin's code ran). ``None``: import it; else the one-line
        failure for which it is skipped.

        Raises:
            ConfigError: ``OML_PLUGIN_SLOW_SECONDS`` is malformed (before any check).
        """
        keys = {plugin: fingerprint(plugin) for plugin in plugins}
        if any(key not in self._verdicts for key in keys.values()):
            self._verdicts.update(read_verdicts(verdicts_path()))
        unchecked = [plugin for plugin, key in keys.items() if key not in self._verdicts]
        verdicts = {plugin.info: self._verdicts.get(key) for plugin, key in keys.items()}
        if unchecked:
            slow_seconds_from_env()  # a malformed value is the command's error, not every plugin's verdict
            checked = run_children(
                [plugin.info for plugin in unchecked],
                self.timeout,
                self.jobs or default_jobs(),
                components=False,
            )
            kept = {plugin: row["error"] for plugin, (row, ran) in zip(unchecked, checked) if ran}
            store_verdicts(verdicts_path(), kept)
            self._verdicts.update({keys[plugin]: error for plugin, error in kept.items()})
            verdicts.update({plugin.info: row["error"] for plugin, (row, _) in zip(unchecked, checked)})
        self._vetted.update({plugin.info: plugin for plugin in plugins})
        return verdicts

    def hung(self, plugin: PluginInfo, step: str) -> None:
        """End the command (:attr:`end`): ``plugin`` has been in ``step`` for :attr:`timeout` seconds in this
        process. A vetted plugin's verdict becomes the hang first, so that the next commands skip it."""
        what = f"oml plugin {plugin.provider}: hung for more than {self.timeout:g} s while loading ({step})"
        vetted = self._vetted.get(plugin)
        if vetted is None:  # the core's built-ins, or a plugin added in code
            self.end(f"{what}; ended: a running import or hook cannot be stopped")
        store_verdicts(verdicts_path(), {vetted: what})
        self.end(
            f"{what}; ended: a running import or hook cannot be stopped. The next commands skip it "
            "(oml plugins --check checks it again)"
        )


__all__ = ["PluginVetting"]
