"""Each plugin loaded and checked in a process of its own, with a time limit: ``oml plugins --check``
(:func:`check_plugins`), and the vetting of the plugins before a command imports them
(:mod:`oml_core.registry.vetting`, :func:`run_children` without the components).

The calling process imports no plugin. It settles the entry-point names from the metadata
(:func:`~oml_core.registry.manager.discover_plugins`, which reports the refused claimants), then runs one child
process per plugin, at most ``jobs`` at a time (forked from multiprocessing's fork server, which has imported
oml_core and torch but no plugin: :func:`child_context`). A child imports the plugin, registers it beside the
core's built-ins, calls its hooks, imports each of its components
(:func:`~oml_core.registry.plugin_rows.plugin_row`; not when vetting, whose children need neither torch nor the
components) and writes its report row as json. The child records each step as it begins (the
:data:`~oml_core.registry.manager.LOADING_LOGGER` lines, ``<plugin>\\t<step>``, in a file), so that a child that
fails says where:

- a step running for more than ``timeout`` seconds (the start-up, before any plugin code runs, for more than
  :data:`START_TIMEOUT`): the child is killed (its whole process group), ``hung for more than 20 s while loading
  (hook oml_register_losses)``;
- a child that ends without its row: ``exited with status 3 during import`` (``os._exit(3)``), ``killed by
  SIGSEGV during import`` (a crash).

Each such failure, like a plugin that fails to load in its child, is reported as a broken plugin is (a
:class:`~oml_core.registry.errors.PluginWarning`, or a :class:`~oml_core.registry.errors.PluginLoadError` when
strict) and is its row's ``error``: ``oml plugin slow (slow-oml-plugin 0.3): hung for more than ...``. The
rows' errors are kept as the plugins' verdicts (:mod:`oml_core.registry.verdicts`), which the next commands go by.
"""

from __future__ import annotations

import importlib
import json
import logging
import multiprocessing
import multiprocessing.context
import multiprocessing.process
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

from oml_core import __version__
from oml_core.registry.entry import PluginInfo
from oml_core.registry.manager import (
    BUILTINS_DISTRIBUTION,
    BUILTINS_NAME,
    DEFAULT_TIMEOUT,
    LOADING_LOGGER,
    discover_plugins,
    import_plugin,
    iter_entry_points,
    plugin_info_for,
    report_plugin_failure,
    slow_seconds_from_env,
)
from oml_core.registry.plugin_rows import failed_row, plugin_row
from oml_core.registry.registry import Registry
from oml_core.registry.verdicts import store_verdicts, verdicts_path

#: How often a child's steps and status are looked at, in seconds.
POLL_SECONDS = 0.05
#: The step of a child before it records its first: starting (forked, or Python and oml_core imported anew).
START_STEP = "start-up"
#: The least time limit of the start-up, which runs no plugin's code (in seconds): the first child waits for
#: the fork server to import torch.
START_TIMEOUT = 120.0


@dataclass(frozen=True)
class ChildOutcome:
    """How a child process ended.

    Attributes:
        status: Its exit status (negative: the signal that killed it); ``None`` when it was killed as hung.
        step: The step it was in when it ended (``import``, ``hook oml_register_losses``).
        row: The report row it wrote; ``None`` when it wrote none.
        last_output: The last line it wrote to stdout or stderr (shortened), ``""`` when none.
    """

    status: int | None
    step: str
    row: dict[str, Any] | None
    last_output: str = ""


def default_jobs() -> int:
    """The CPUs this process may run on (the bound of the children running at once)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def check_plugins(
    *,
    include_builtins: bool,
    allow: Collection[str] | None,
    strict: bool,
    timeout: float = DEFAULT_TIMEOUT,
    jobs: int | None = None,
) -> list[dict[str, Any]]:
    """The checked report rows (:func:`~oml_core.registry.plugin_rows.plugins_report` with ``check``) of every plugin
    that ``allow`` admits (and of the built-ins with ``include_builtins``), each plugin loaded in its own child
    process (see the module's docstring), ``jobs`` (default: :func:`default_jobs`) at a time.

    Returns:
        The rows in the order of the entry points' names, the built-ins first; a refused plugin's row has its
        refusal as ``error``, a failed child's the failure. Each checked plugin's ``error`` is kept as its verdict
        (:func:`~oml_core.registry.verdicts.store_verdicts`).

    Raises:
        PluginLoadError: ``strict`` and a plugin is refused, fails to load or its child fails.
        ConfigError: ``OML_PLUGIN_SLOW_SECONDS`` is malformed.
    """
    slow_seconds_from_env()  # a malformed value is the user's error here, not a failure of every child
    found = discover_plugins(allow, strict)
    targets = [f.info for f in found if f.refused is None]
    if include_builtins:
        targets.insert(0, builtins_info())
    checked = run_children(targets, timeout, jobs or default_jobs(), components=True)
    rows = {target: row for target, (row, _) in zip(targets, checked)}
    ran = {target for target, (_, plugin_ran) in zip(targets, checked) if plugin_ran}
    store_verdicts(verdicts_path(), {f: rows[f.info]["error"] for f in found if f.info in ran})
    report = [rows[targets[0]]] if include_builtins else []
    for plugin in found:
        if plugin.refused is not None:
            report.append({**failed_row(plugin.info, plugin.refused), "broken": []})
            continue
        report.append(rows[plugin.info])
    for row in rows.values():
        if row["error"] is not None:
            report_plugin_failure(row["error"], strict)
    return report


def builtins_info() -> PluginInfo:
    """The core's built-in plugin, as its child loads it."""
    return PluginInfo(BUILTINS_NAME, BUILTINS_DISTRIBUTION, __version__)


def run_children(
    targets: Sequence[PluginInfo], timeout: float, jobs: int, components: bool
) -> list[tuple[dict[str, Any], bool]]:
    """The row of each plugin of ``targets``, each from its own child process, ``jobs`` at a time, with its
    components imported and checked (``broken``) when ``components``; a failed child's row says how it failed
    (:func:`outcome_row`). With each row: whether the plugin's code ran (a child that failed in its start-up
    says nothing of its plugin: its row is no verdict to keep). A ``KeyboardInterrupt`` kills every child."""
    cancel = threading.Event()
    with tempfile.TemporaryDirectory(prefix="oml-plugins-check-") as tmp:
        folders = [Path(tmp) / str(i) for i in range(len(targets))]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [
                pool.submit(run_child, target, folder, timeout, cancel, components)
                for target, folder in zip(targets, folders)
            ]
            try:
                outcomes = [future.result() for future in futures]
            except BaseException:
                cancel.set()
                raise
    return [
        (outcome_row(target, outcome, timeout), outcome.row is not None or outcome.step != START_STEP)
        for target, outcome in zip(targets, outcomes)
    ]


def outcome_row(target: PluginInfo, outcome: ChildOutcome, timeout: float) -> dict[str, Any]:
    """The row of ``target``: the child's own, or one whose ``error`` says how the child failed."""
    if outcome.row is not None:
        return outcome.row
    if outcome.status is None:
        what = f"hung for more than {timeout:g} s while loading ({outcome.step})"
    elif outcome.status < 0:
        what = f"killed by {_signal_name(-outcome.status)} during {outcome.step}"
    else:
        what = f"exited with status {outcome.status} during {outcome.step}"
        if outcome.last_output:
            what += f"; its last output: {outcome.last_output}"
    return {**failed_row(target, f"oml plugin {target.provider}: {what}"), "broken": []}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def child_context(
    components: bool,
) -> multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext:
    """How the children start: forked from multiprocessing's fork server, which has imported oml_core (and torch
    when the children import ``components``: each would spend seconds importing it anew) and no plugin; spawned
    where there is no fork server. The fork server is the process's: the first call's preload is the one."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # a module that does not import is skipped
    context.set_forkserver_preload([__name__, "torch"] if components else [__name__])
    return context


def run_child(
    target: PluginInfo, folder: Path, timeout: float, cancel: threading.Event, components: bool
) -> ChildOutcome:
    """Run the child that loads ``target`` (and imports its ``components``), its files in the new folder
    ``folder``; kill it (its whole process group) when one step of the plugin runs longer than ``timeout`` seconds
    (its start-up: longer than :data:`START_TIMEOUT`) or ``cancel`` is set (not started if set before)."""
    if cancel.is_set():
        return ChildOutcome(None, START_STEP, None)
    folder.mkdir()
    steps, output, result = folder / "steps.log", folder / "output.log", folder / "row.json"
    job = {
        "plugin": target.name,
        "distribution": target.distribution,
        "components": components,
        "sys_path": sys.path,
        "environ": dict(os.environ),  # the fork server has the environment of when it started
        "steps": str(steps),
        "output": str(output),
        "result": str(result),
    }
    job_file = folder / "job.json"
    job_file.write_text(json.dumps(job))
    child = child_context(components).Process(
        target=_child_main, args=(str(job_file),), name=f"oml-check-{target.name}"
    )
    child.start()
    try:
        status, step = _watch(child, target.name, steps, timeout, cancel)
    finally:
        _kill(child)
    # the row, written whole (renamed into place) as the child's last act before os._exit(0), is the outcome
    # whatever status came back: under load, multiprocessing's fork server may lose a child's exit status, and
    # Process.exitcode is then 255 (an end of file where the status should be) for a child that ended well
    row = json.loads(result.read_text()) if result.is_file() else None
    return ChildOutcome(status, step, row, _last_line(output) if output.is_file() else "")


def _last_line(path: Path, limit: int = 200) -> str:
    lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    last = next((line for line in reversed(lines) if line), "")
    return last if len(last) <= limit else last[: limit - 3] + "..."


def _watch(
    child: multiprocessing.process.BaseProcess,
    plugin: str,
    steps: Path,
    timeout: float,
    cancel: threading.Event,
) -> tuple[int | None, str]:
    """Wait for ``child``, the child of ``plugin``; returns its status (``None`` when a step outlasted its time
    limit or ``cancel`` was set) and its last step."""
    step, size, since = START_STEP, -1, time.monotonic()
    while True:
        child.join(POLL_SECONDS)
        if child.exitcode is not None:
            return child.exitcode, _last_step(steps, plugin, step)
        if cancel.is_set():
            return None, step
        current = steps.stat().st_size if steps.exists() else -1
        if current != size:
            size, step, since = current, _last_step(steps, plugin, step), time.monotonic()
        elif time.monotonic() - since > (max(timeout, START_TIMEOUT) if step == START_STEP else timeout):
            return None, step


def _last_step(steps: Path, plugin: str, default: str) -> str:
    """The last step recorded in ``steps`` (``hook x``; ``hook x of plugin y`` for a step of another plugin than
    ``plugin``), ``default`` when none is."""
    if not steps.exists():
        return default
    lines = steps.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines:
        return default
    name, _, step = lines[-1].partition("\t")
    return step if name == plugin else f"{step} of plugin {name}"


def _kill(child: multiprocessing.process.BaseProcess) -> None:
    """Kill ``child``'s process group (``child`` alone before it has one), then reap it."""
    if child.exitcode is None:
        try:
            os.killpg(child.pid, signal.SIGKILL)  # type: ignore[arg-type]  # started: it has a pid
        except (
            AttributeError,
            ProcessLookupError,
            PermissionError,
        ):  # no process groups; none of its own yet
            child.kill()
    child.join()


# ----------------------------------------------------------------------------------------------- child
def find_entry_point(name: str, distribution: str | None) -> tuple[EntryPoint, PluginInfo]:
    """The installed entry point ``name`` of ``distribution``, with its plugin's info.

    Raises:
        LookupError: none is installed.
    """
    for ep in iter_entry_points():
        info = plugin_info_for(ep)
        if ep.name == name and info.distribution == distribution:
            return ep, info
    raise LookupError(f"no oml entry point {name!r} of the distribution {distribution!r} is installed")


def check_in_child(name: str, distribution: str | None, components: bool) -> dict[str, Any]:
    """In a child process: the row of the plugin ``name`` of ``distribution`` (``oml_core``: the built-ins),
    loaded beside the built-ins only, leniently (a failure is the row's ``error``), its components imported and
    checked when ``components``."""
    registry = Registry(load_entrypoints=False, strict=False)
    if name != BUILTINS_NAME:
        ep, info = find_entry_point(name, distribution)
        plugin, error = import_plugin(ep, info, strict=False)
        if error is not None:
            return {**failed_row(info, error), "broken": []}
        registry.add_plugin(plugin, name=info.name, distribution=info.distribution, version=info.version)
    record = next(r for r in registry.plugins() if r.info.name == name)
    return plugin_row(registry, record, check=components)


def _child_main(job_file: str) -> None:
    """The child's life (a job written by :func:`run_child`): its own process group, the parent's environment and
    ``sys.path``, its output to a file, each step recorded; then the row written and an end at once (a plugin's
    threads or exit handlers cannot keep the child alive)."""
    job = json.loads(Path(job_file).read_text())
    if hasattr(os, "setsid"):
        os.setsid()  # killed whole, with any process a plugin starts
    output = os.open(job["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.environ.clear()
    os.environ.update(job["environ"])
    sys.path[:] = job["sys_path"]  # the parent's: the same distributions, those added at run time included
    importlib.invalidate_caches()
    handler = logging.FileHandler(job["steps"], encoding="utf-8")  # flushed at every step
    handler.setFormatter(logging.Formatter("%(message)s"))
    steps = logging.getLogger(LOADING_LOGGER)
    steps.addHandler(handler)
    steps.setLevel(logging.DEBUG)
    steps.propagate = False
    row = check_in_child(job["plugin"], job["distribution"], job["components"])
    result = Path(job["result"])
    partial = result.with_suffix(".partial")
    partial.write_text(json.dumps(row))
    partial.replace(result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
