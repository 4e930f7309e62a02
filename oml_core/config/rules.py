"""The rules of a config's values and the fields of the schemas: small reusable validators (``a positive
int``, ``a list of positive ints``, ``a {name, args} spec of a loss``), the schema fields that carry them
(:func:`setting`, :func:`spec`, :func:`specs`), a component's spec as the schemas hold it (:class:`ComponentSpec`),
and :func:`validated`, which builds a schema's dataclass from checked values.

A refusal is one line naming the key, the value and what is expected:
``max_epochs: expected a positive int, got 'abc'``.
"""

from __future__ import annotations

import copy
import difflib
import functools
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from omegaconf import MISSING

from oml_core.registry import ConfigError
from oml_core.registry.arg_types import fits

RULE = "oml_rule"  # a field's metadata key: its Rule
KIND = "oml_kind"  # a field's metadata key: the kind of the component it holds
DOC = "oml_doc"  # a field's metadata key: the one text that documents its key (see key_doc)


T = TypeVar("T")


# ------------------------------------------------------------------------------------------------- rules
def _as_is(value: Any, key: str) -> Any:
    return value


#: How the pipelines' rules word a refusal: ``max_epochs: expected a positive int, got 'abc'``.
EXPECTED = "{key}: expected {expected}, got {value}"
#: How ``oml index build``'s rules word one: ``bs must be an integer >= 1, got 0``.
MUST_BE = "{key} must be {expected}, got {value}"


@dataclass(frozen=True)
class Rule:
    """A validator of one config value.

    Attributes:
        expected: What the value must be, as messages say it: ``"a positive int"``.
        plural: The same said of the items of a list: ``"positive ints"``.
        accepts: Whether a value has the right type and range (the parts of a mapping are ``convert``'s).
        convert: ``(value, key) -> value as the schema holds it`` for an accepted value; it checks the parts of
            the value, whose messages name their keys under ``key`` (``metric_args.cmc_top_k``).
        refusal: The message of a value ``accepts`` refuses, its ``{key}``, ``{expected}`` and ``{value}`` (the
            value's ``repr``) filled in: :data:`EXPECTED` (the pipelines'), or :data:`MUST_BE` (see
            :func:`must_be`).
    """

    expected: str
    plural: str
    accepts: Callable[[Any], bool]
    convert: Callable[[Any, str], Any] = _as_is
    refusal: str = EXPECTED

    def check(self, value: Any, key: str) -> Any:
        """``value`` (of the config key ``key``) as the schema holds it.

        Raises:
            ConfigError: ``<key>: expected <expected>, got <value>`` (as :attr:`refusal` words it), or the problem
                of a part of the value.
        """
        if not self.accepts(value):
            raise ConfigError(self.refusal.format(key=key, expected=self.expected, value=repr(value)))
        return self.convert(value, key)


def must_be(rule: Rule, expected: str) -> Rule:
    """``rule`` whose refusal reads ``<key> must be <expected>, got <value>`` (:data:`MUST_BE`)."""
    return replace(rule, expected=expected, refusal=MUST_BE)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def integer(low: int | None = None, high: int | None = None) -> Rule:
    """An int (never a bool) in ``[low, high]`` (a bound that is None is open): ``a positive int``."""
    if high is not None:
        noun = f"int in [{low}, {high}]"
    else:
        noun = {None: "int", 0: "non-negative int", 1: "positive int"}.get(low, f"int >= {low}")
    return Rule(
        f"an {noun}" if noun[0] in "aeiou" else f"a {noun}",
        noun.replace("int", "ints", 1),
        lambda v: fits(int, v) and (low is None or v >= low) and (high is None or v <= high),
    )


def count(low: int, limit: int) -> Rule:
    """An int (never a bool) of at least ``low`` (said as ``integer(low)`` says it; the field's doc says the limit)
    and at most ``limit``, a plausibility bound (:mod:`~oml_core.config.bounds`): a larger one is refused as
    ``max_epochs: 1000000000000 is past the limit of 100,000``."""
    bounded = integer(low)

    def convert(value: Any, key: str) -> Any:
        if value > limit:
            raise ConfigError(f"{key}: {value} is past the limit of {limit:,}")
        return value

    return replace(bounded, convert=convert)


def number(low: float, high: float) -> Rule:
    """A number (an int or a float, never a bool) in ``[low, high]``."""
    return Rule(
        f"a number in [{low}, {high}]",
        f"numbers in [{low}, {high}]",
        lambda v: fits(float, v) and low <= v <= high,
    )


def one_of(*options: Any) -> Rule:
    """One of ``options`` (of the same type: ``16`` is not ``"16"``, ``True`` is not ``1``)."""
    said = [repr(option) for option in options]
    expected = f"{said[0]} or {said[1]}" if len(said) == 2 else f"one of {', '.join(said)}"
    return Rule(
        expected,
        f"values among {', '.join(said)}",
        lambda v: any(type(v) is type(o) and v == o for o in options),
    )


def either(*rules: Rule) -> Rule:
    """A value that one of ``rules`` accepts (converted by the first of them that does)."""

    def convert(value: Any, key: str) -> Any:
        return next(rule for rule in rules if rule.accepts(value)).convert(value, key)

    return Rule(
        _alternatives([rule.expected for rule in rules]),
        _alternatives([rule.plural for rule in rules]),
        lambda v: any(rule.accepts(v) for rule in rules),
        convert,
    )


def nullable(*rules: Rule) -> Rule:
    """Null, or a value that one of ``rules`` accepts."""
    return either(*rules, NULL)


def list_of(item: Rule, non_empty: bool = False) -> Rule:
    """A list (or tuple) whose every item ``item`` accepts, held as a list; the message names the whole list."""
    noun = f"{'non-empty ' if non_empty else ''}list of {item.plural}"

    def convert(value: Any, key: str) -> list[Any]:
        return [item.convert(v, f"{key}[{i}]") for i, v in enumerate(value)]

    return Rule(
        f"a {noun}",
        noun.replace("list", "lists", 1),
        lambda v: _is_list(v) and (len(v) > 0 or not non_empty) and all(item.accepts(x) for x in v),
        convert,
    )


def _alternatives(said: list[str]) -> str:
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} or {said[-1]}"


NULL = Rule("null", "nulls", lambda v: v is None)
BOOL = Rule("true or false", "booleans", lambda v: isinstance(v, bool))
STRING = Rule("a string", "strings", lambda v: isinstance(v, str))
#: A name (the run's ``postfix``): a string, or an int as hydra reads ``postfix=1``, held as a string.
NAME = Rule("a string", "strings", lambda v: isinstance(v, str) or fits(int, v), lambda v, key: str(v))
#: A file or folder: a string (or an ``os.PathLike`` given in code), held as a string.
PATH = Rule("a path", "paths", lambda v: isinstance(v, str | os.PathLike), lambda v, key: os.fspath(v))
MAPPING = Rule("a mapping", "mappings", lambda v: isinstance(v, Mapping), lambda v, key: dict(v))
#: ``tags``: a list, one tag or null (none), held as a list.
TAGS = Rule(
    "a list, a string or null",
    "tag lists",
    lambda v: v is None or isinstance(v, str) or _is_list(v),
    lambda v, key: [v] if isinstance(v, str) else list(v or []),
)
#: A component's ``args``: a mapping (null: none), held as a dict.
ARGS = Rule(
    "a mapping", "mappings", lambda v: v is None or isinstance(v, Mapping), lambda v, key: dict(v or {})
)
POSITIVE_INT = integer(1)
NON_NEGATIVE_INT = integer(0)
FRACTION = number(0, 1)


# ----------------------------------------------------------------------------------------------- fields
def setting(rule: Rule, default: Any = MISSING, *, doc: str | None = None) -> Any:
    """A schema field checked by ``rule``; without ``default`` the key is required (hydra's ``MISSING``). ``doc``
    documents the key (None: a field that re-declares a base's only to change its default keeps the base's doc,
    see :func:`key_doc`)."""
    metadata = _metadata(doc, {RULE: rule})
    if isinstance(default, list | dict):
        return field(default_factory=functools.partial(copy.deepcopy, default), metadata=metadata)
    return field(default=default, metadata=metadata)


def spec(kind: str, optional: bool = False, *, required: bool | None = None, doc: str | None = None) -> Any:
    """A schema field holding a component of ``kind``: a spec, or null too when ``optional``. The key is required
    unless ``optional`` (then null by default); ``required=True`` makes an ``optional`` key required too (given,
    as a spec or null). ``doc``: as :func:`setting`'s."""
    rule = nullable(component(kind)) if optional else component(kind)
    is_required = not optional if required is None else required
    return field(default=MISSING if is_required else None, metadata=_metadata(doc, {RULE: rule, KIND: kind}))


def specs(kind: str, *, doc: str | None = None) -> Any:
    """A schema field holding a list of components of ``kind`` (each a ``{name, args}`` spec or a name), ``[]`` by
    default. ``doc``: as :func:`setting`'s."""
    return field(default_factory=list, metadata=_metadata(doc, {RULE: list_of(component(kind)), KIND: kind}))


def _metadata(doc: str | None, metadata: dict[str, Any]) -> dict[str, Any]:
    return metadata if doc is None else {**metadata, DOC: doc}


def key_doc(schema: type, name: str) -> str:
    """The text that documents the key ``name`` of the dataclass ``schema``: the ``doc`` of its field, or, for a
    field re-declared without one (``postfix`` with another default), that of the nearest class of ``schema``'s
    MRO that declares the field with a doc.

    Raises:
        KeyError: ``schema`` has no field ``name``, or no class of its MRO documents it.
    """
    for cls in schema.__mro__:
        declared = vars(cls).get("__dataclass_fields__", {}).get(name)
        if declared is not None and DOC in declared.metadata:
            return str(declared.metadata[DOC])
    raise KeyError(f"{schema.__name__}.{name} has no documentation")


# ---------------------------------------------------------------------------------------- nested values
@dataclass(eq=False)
class ComponentSpec(Mapping[str, Any]):
    """A component's config: its registered ``name`` and the ``args`` of its factory (nested specs among them).

    It is a mapping of ``name`` and ``args``, so that it goes wherever a ``{name, args}`` dict goes
    (``registry.build(kind, spec)``) and equals such a dict.
    """

    name: str = setting(STRING, doc="The component's registered name (`oml registry KIND` lists them).")
    args: dict[str, Any] = setting(
        ARGS,
        {},
        doc="The arguments of its factory (null or `{}`: the factory's defaults), nested specs among them.",
    )

    def __getitem__(self, key: str) -> Any:
        if key not in ("name", "args"):
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(("name", "args"))

    def __len__(self) -> int:
        return 2


def component(kind: str) -> Rule:
    """A ``{name, args}`` spec of a component of ``kind``, or just its name, held as a :class:`ComponentSpec`."""
    article = "an" if kind[0] in "aeiou" else "a"

    def convert(value: Any, key: str) -> ComponentSpec:
        return ComponentSpec(name=value) if isinstance(value, str) else validated(ComponentSpec, value, key)

    return Rule(
        f"a {{name, args}} spec of {article} {kind}",
        f"{{name, args}} specs of {kind}s",
        lambda v: isinstance(v, str | Mapping),
        convert,
    )


def validated(schema: type[T], values: Mapping[str, Any], key: str = "") -> T:
    """An instance of the dataclass ``schema`` of ``values`` (the value of the config key ``key``; ``""``: the
    whole config), each value checked by its field's rule.

    Raises:
        ConfigError: an unknown key, a missing required key (a value ``???``, omegaconf's missing value, is
            missing too) or a value its rule refuses; the message names the key under ``key``.
    """
    where = key or getattr(schema, "pipeline", "") or schema.__name__
    schema_fields = fields(schema)  # type: ignore[arg-type]
    check_keys(values, [f.name for f in schema_fields], where)
    given = {k: v for k, v in values.items() if not (isinstance(v, str) and v == MISSING)}
    require(given, *(f.name for f in schema_fields if is_required(f)), pipeline=where)
    prefix = f"{key}." if key else ""
    checked = {
        f.name: f.metadata[RULE].check(given[f.name], f"{prefix}{f.name}")
        for f in schema_fields
        if f.name in given
    }
    return schema(**checked)


def check_keys(cfg: Mapping[str, Any], known: Collection[str], pipeline: str) -> None:
    """Raise a ``ConfigError`` for the first top-level key of ``cfg`` that ``pipeline`` does not know, naming
    the closest known key (a misspelt key is never silently ignored)."""
    for key in cfg:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{pipeline}: unknown config key {key!r}{hint} (known keys: {', '.join(sorted(known))})"
            )


def require(cfg: Mapping[str, Any], *keys: str, pipeline: str) -> None:
    """Raise a ``ConfigError`` naming every missing top-level key of ``cfg``."""
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise ConfigError(f"{pipeline}: the config lacks the key(s) {missing}")


def is_required(f: Any) -> bool:
    """Whether the schema field ``f`` is a required key (no default: hydra's ``MISSING``)."""
    return isinstance(f.default, str) and f.default == MISSING


def default_of(f: Any) -> Any:
    """The default of the optional schema field ``f`` (a fresh copy of a mutable one)."""
    return f.default_factory() if callable(f.default_factory) else copy.deepcopy(f.default)


__all__ = [
    "ARGS",
    "BOOL",
    "ComponentSpec",
    "DOC",
    "EXPECTED",
    "FRACTION",
    "KIND",
    "MAPPING",
    "MUST_BE",
    "NAME",
    "NON_NEGATIVE_INT",
    "NULL",
    "PATH",
    "POSITIVE_INT",
    "RULE",
    "Rule",
    "STRING",
    "TAGS",
    "check_keys",
    "component",
    "count",
    "default_of",
    "either",
    "integer",
    "is_required",
    "key_doc",
    "list_of",
    "must_be",
    "nullable",
    "number",
    "one_of",
    "require",
    "setting",
    "spec",
    "specs",
    "validated",
]
