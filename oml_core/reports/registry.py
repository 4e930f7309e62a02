"""What ``oml registry`` shows: the registered names of every kind or of one kind (:func:`registry_listing`), or one
component (:func:`component_view`): its provider, its factory's arguments with their defaults, its default
config."""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oml_core.registry import KINDS, Registry, RegistryError
from oml_core.registry.registry import EVERY_RUN_KIND
from oml_core.reports.answer import Answer


@dataclass(frozen=True)
class RegistryListing(Answer):
    """The registered components of ``kinds``, a row each: ``{"kind", "name", "plugin", "aliases",
    "description", "every_run"}``; ``detailed``: one kind was asked for, whose descriptions the table shows. Its
    JSON is the list of rows."""

    kinds: list[str]
    rows: list[dict[str, Any]]
    detailed: bool = False

    def as_data(self) -> list[dict[str, Any]]:
        """The rows (``oml registry --format json``)."""
        return self.rows

    def as_text(self) -> str:
        """Per kind, ``kind (its description):`` and a line per component sorted by name: its name, its plugin,
        ``(every run)`` for a callback added to every run and, when ``detailed``, its description;
        ``(none)`` for a kind without one."""
        lines = []
        for kind in self.kinds:
            entries = [row for row in self.rows if row["kind"] == kind]
            lines.append(f"{kind} ({KINDS[kind].description}):")
            if not entries:
                lines.append("    (none)")
            for row in sorted(entries, key=lambda row: row["name"]):
                detail = f" - {row['description']}" if self.detailed and row["description"] else ""
                every_run = " (every run)" if row["every_run"] else ""
                lines.append(f"    {row['name']:<32} {row['plugin']}{every_run}{detail}")
        return "\n".join(lines)


def registry_listing(registry: Registry, kinds: Sequence[str] | None = None) -> RegistryListing:
    """The components of ``registry`` of ``kinds`` (None: every kind, not detailed; given: detailed), in the
    order of the kinds, then of the registry."""
    shown = list(KINDS) if kinds is None else list(kinds)
    rows = [
        {
            "kind": e.kind,
            "name": e.name,
            "plugin": e.plugin.name,
            "aliases": list(e.aliases),
            "description": e.description,
            "every_run": e.every_run,
        }
        for kind in shown
        for e in registry.entries(kind)
    ]
    return RegistryListing(kinds=shown, rows=rows, detailed=kinds is not None)


@dataclass(frozen=True)
class ComponentView(Answer):
    """One component, as :func:`component_view` describes it (``report``); ``argument_texts``: each argument as
    its factory's signature writes it (``lr: float = 0.001``), in the order of ``report["arguments"]``, for the
    text. Its JSON is the report."""

    report: dict[str, Any]
    argument_texts: list[str]

    def as_data(self) -> dict[str, Any]:
        """The report (``oml registry KIND NAME --format json``)."""
        return self.report

    def as_text(self) -> str:
        """The table: kind, name, aliases, provider, description, factory (for a callback: whether it is added to
        every run), the arguments one a line (``(required)`` marked) and the default config as yaml with how to
        use it on the command line."""
        from omegaconf import OmegaConf

        report = self.report
        rows = [
            ("kind", report["kind"]),
            ("name", f"{report['name']} (qualified: {report['qualified_name']})"),
            ("aliases", ", ".join(report["aliases"]) or "(none)"),
            (
                "provider",
                f"plugin {report['plugin']}, distribution "
                f"{report['distribution'] or '(none, added in code)'} {report['version'] or ''}".rstrip(),
            ),
            ("description", report["description"] or "(none)"),
            ("factory", report["factory"]),
        ]
        if report["kind"] == EVERY_RUN_KIND:
            every_run = (
                "yes: added to every training run (callbacks_disabled switches it off)"
                if report["every_run"]
                else "no: added where a run's callbacks names it"
            )
            rows.append(("every run", every_run))
        lines = [f"{label + ':':<13}{value}" for label, value in rows]
        lines.append("arguments:")
        if not report["arguments"]:
            lines.append(
                f"    {report['signature']}" if report["signature"].startswith("<") else "    (none)"
            )
        for argument, text in zip(report["arguments"], self.argument_texts, strict=True):
            required = "  (required)" if argument["required"] else ""
            lines.append(f"    {text}{required}")
        config = report["default_config"]
        if config is None:
            lines.append("default config: (no default config)")
        else:
            lines.append(
                f"default config ({report['kind']}/{report['name']}.yaml; on the command line "
                f"{report['kind']}@KEY={report['name']}):"
            )
            lines.extend(f"    {line}" for line in OmegaConf.to_yaml(config).splitlines())
        return "\n".join(lines)


def component_view(registry: Registry, kind: str, name: str) -> ComponentView:
    """What ``oml registry KIND NAME`` shows. Its report: :meth:`Registry.describe` (kind, name, qualified name,
    aliases, plugin, distribution, version, factory, signature, description, every_run), ``provider``, the
    factory's ``arguments`` (``name``, ``kind``, ``annotation``, ``required``, ``default``: a json value, else its
    repr; empty when the factory does not import) and the ``default_config`` (None when there is none).

    Raises:
        RegistryError: ``name`` is not a component of ``kind`` (with the close matches), or two plugins give it.
    """
    entry = registry.get(kind, name)
    report = registry.describe(kind, name)
    report["provider"] = entry.plugin.provider
    try:
        factory = entry.load()
    except RegistryError:  # described as unavailable in the signature
        parameters = []
    else:
        parameters = _parameters(factory)
    report["arguments"] = [_argument(p) for p in parameters]
    report["default_config"] = registry.default_config(kind, entry.name)
    return ComponentView(report=report, argument_texts=[str(p) for p in parameters])


def _parameters(factory: Any) -> list[inspect.Parameter]:
    """The parameters of ``factory`` (a class: of its constructor), string annotations evaluated where they
    resolve."""
    try:
        signature = inspect.signature(factory, eval_str=True)
    except Exception:  # unresolvable forward references: as written
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):  # no signature (a builtin)
            return []
    return list(signature.parameters.values())


def _argument(parameter: inspect.Parameter) -> dict[str, Any]:
    empty = inspect.Parameter.empty
    annotation = parameter.annotation
    row: dict[str, Any] = {
        "name": parameter.name,
        "kind": parameter.kind.name.lower(),
        "annotation": None if annotation is empty else inspect.formatannotation(annotation),
        "required": parameter.default is empty
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD),
    }
    if parameter.default is not empty:
        row["default"] = _json_value(parameter.default)
    return row


def _json_value(value: Any) -> Any:
    """``value`` where json writes it as it is (None, bool, numbers, strings, lists and dicts of them), else
    its repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


__all__ = ["ComponentView", "RegistryListing", "component_view", "registry_listing"]
