"""The reference of the config keys, written from the schemas' fields (:mod:`~oml_core.config.schemas`), where each
key is documented once (its field's ``doc``, :func:`~oml_core.config.rules.key_doc`): the "config keys" section
that ends ``oml COMMAND --help`` (:func:`help_section`), the ``#`` comments of ``--show-config``
(:func:`commented_yaml`) and ``docs/config.md`` (:func:`markdown`, written by
``python -m tests.scripts.config_reference``).

A key's row says what its rule expects (``a positive int``), its default (``required`` for a key without one) and
its doc; the keys of a block that has a schema of its own (``scheduling``) follow it as ``scheduling.scheduler``.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import yaml

from oml_core.config.bounds import (
    MAX_BATCH_SIZE,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_FILE_BYTES,
    MAX_CONFIG_VALUES,
    MAX_EPOCHS,
    MAX_LIST_ITEMS,
    MAX_OVERRIDE_CHARS,
    MAX_OVERRIDE_ITEMS,
)
from oml_core.config.rules import RULE, ComponentSpec, default_of, is_required, key_doc
from oml_core.config.schemas import schema_of

#: The width of the text of ``--help`` and of ``--show-config``'s comments.
WIDTH = 110
#: Where the reference of every pipeline's keys is, as the help and the docs name it.
DOCS_PAGE = "docs/config.md"


class KeyReference(NamedTuple):
    """One config key as the reference shows it.

    Attributes:
        key: Its name; a key of a nested block is dotted (``scheduling.scheduler``).
        expected: What its rule expects (``a positive int``).
        default: Its default as yaml writes it (``null``, ``[]``, ``""``, ``42``), or ``required``.
        doc: The text that documents it.
    """

    key: str
    expected: str
    default: str
    doc: str


def key_references(schema: type, prefix: str = "") -> list[KeyReference]:
    """The reference of every key of the dataclass ``schema``, in its fields' order; the keys of a field that holds
    a schema of its own (``scheduling``: ``SchedulingConfig``) follow that field's, under ``<field>.``."""
    rows = []
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        default = "required" if is_required(f) else _yaml_value(default_of(f))
        rows.append(
            KeyReference(f"{prefix}{f.name}", f.metadata[RULE].expected, default, key_doc(schema, f.name))
        )
        for nested in _nested_schemas(hints[f.name]):
            rows.extend(key_references(nested, f"{prefix}{f.name}."))
    return rows


def _nested_schemas(hint: Any) -> Iterator[type]:
    """The dataclasses (other than a component's spec) that the type ``hint`` of a field names."""
    for candidate in (hint, *typing.get_args(hint)):
        if (
            isinstance(candidate, type)
            and dataclasses.is_dataclass(candidate)
            and candidate is not ComponentSpec
        ):
            yield candidate


def _yaml_value(value: Any) -> str:
    """``value`` as yaml's flow style writes it: ``null``, ``true``, ``[]``, ``{}``, ``42``, ``60.0``, a string as it
    is (``""`` when empty)."""
    if isinstance(value, str):
        return value or '""'
    return json.dumps(value)


def _wrapped(text: str, width: int, indent: str, then: str | None = None) -> list[str]:
    """``text`` in lines of at most ``width`` characters (a longer word alone), the first starting with
    ``indent``, the others with ``then`` (None: ``indent``); never broken at a hyphen (``bf16-mixed``,
    ``--skip-image-check``)."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=indent if then is None else then,
        break_long_words=False,
        break_on_hyphens=False,
    )


def help_section(pipeline: str, width: int = WIDTH) -> str:
    """The "config keys" section of ``pipeline``'s ``--help``: per key of its schema a line ``<key>: <expected>;
    default <default>`` (``required`` when it has none; a longer one goes on indented by 4), then its doc,
    indented by 6.

    Raises:
        ValueError: no pipeline has that name.
    """
    schema = schema_of(pipeline)
    lines = _wrapped(
        f"config keys ({schema.__name__}; a default is the key's value when the config lacks it, the default "
        f"config file sets most keys; every command's keys: {DOCS_PAGE}):",
        width,
        "",
    )
    for row in key_references(schema):
        default = row.default if row.default == "required" else f"default {row.default}"
        lines.extend(_wrapped(f"{row.key}: {row.expected}; {default}", width, "  ", " " * 4))
        lines.extend(_wrapped(row.doc, width, " " * 6))
    return "\n".join(lines) + "\n"


def commented_yaml(config: Mapping[str, Any], pipeline: str, width: int = WIDTH) -> str:
    """``config`` (plain containers, its interpolations resolved) as block-style yaml, a blank line between its
    top-level keys, each one that ``pipeline``'s schema knows preceded by its doc as ``#`` comment lines (a key of
    the user's own has none): ``yaml.safe_load`` of the text is ``config``.

    Raises:
        ValueError: no pipeline has that name.
    """
    schema = schema_of(pipeline)
    known = {f.name for f in dataclasses.fields(schema)}
    parts = []
    for key, value in config.items():
        comment = _wrapped(key_doc(schema, key), width, "# ") if key in known else []
        dumped = yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True, default_flow_style=False)
        parts.append("".join(f"{line}\n" for line in comment) + dumped)
    return "\n".join(parts)


def markdown(sections: Sequence[tuple[str, str]]) -> str:
    """``docs/config.md``: a section per ``(command, pipeline)`` of ``sections`` (``("train",
    "extractor_training_pipeline")``), with the table of its schema's keys (key, expected, default, doc).

    Raises:
        ValueError: no pipeline has one of those names.
    """
    out = [
        "# Config keys",
        "",
        "Every key of every pipeline's config, and of `oml index build`'s, from the schemas in "
        "`oml_core/config/schemas.py`, where each key is documented once, on its field. The same text ends `oml "
        "COMMAND --help` and stands above each key that `--show-config` prints. This page is generated by "
        "`python -m tests.scripts.config_reference`: do not edit it by hand (`tests/test_config_reference.py` "
        "fails when it differs).",
        "",
        "A default is the key's value when the config lacks it; a required key has none (the default config of "
        "each command, `oml_core/configs/<pipeline>.yaml`, gives every one). A component is a `{name, args}` spec "
        "(or just its name) of a registered component: `oml registry KIND` lists the names.",
        "",
        "A config is bounded (`oml_core/config/bounds.py`), and what passes a bound is refused in one line naming the "
        f"file or key and the limit, before hydra reads it: a config file of at most {MAX_CONFIG_FILE_BYTES:,} "
        f"bytes, {MAX_CONFIG_VALUES:,} values (its yaml aliases expanded), {MAX_CONFIG_DEPTH} levels of nesting and "
        f"{MAX_LIST_ITEMS:,} items in a list; an override of at most {MAX_OVERRIDE_CHARS:,} characters and "
        f"{MAX_OVERRIDE_ITEMS:,} items. Counts have plausibility bounds, said in their rows: epochs at most "
        f"{MAX_EPOCHS:,}, batch sizes at most {MAX_BATCH_SIZE:,} (a sampler's batch too).",
        "",
    ]
    for command, pipeline in sections:
        schema = schema_of(pipeline)
        out += [
            f"## oml {command}",
            "",
            f"`{pipeline}`: the schema `{schema.__name__}`, the default config "
            f"`oml_core/configs/{pipeline}.yaml`.",
            "",
            "| key | expected | default | what it is |",
            "|---|---|---|---|",
        ]
        for row in key_references(schema):
            default = row.default if row.default == "required" else f"`{row.default}`"
            cells = (f"`{row.key}`", row.expected, default, row.doc)
            out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        out.append("")
    return "\n".join(out)


__all__ = [
    "DOCS_PAGE",
    "KeyReference",
    "WIDTH",
    "commented_yaml",
    "help_section",
    "key_references",
    "markdown",
]
