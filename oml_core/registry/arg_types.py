"""The types of a component's config arguments, checked against its factory's annotations before it is built.

A config gives plain values (numbers, strings, booleans, null, lists, mappings). An argument whose parameter is
annotated with such a type, or with ``Optional``/``Union``/``Literal``/``list[...]``/``Sequence[...]``/
``tuple[...]``/``Mapping[...]`` of such types, must get a value of that type; ``int`` is accepted where
``float`` is expected, ``bool`` is never taken for a number. Not checked: unannotated and ``Any`` parameters,
annotations that cannot be resolved (a forward reference to a name that does not exist), parameters annotated
with a class alone (a ``Path``, an interface: a config cannot hold one, so its value is the factory's business),
``None`` given to a parameter whose default is ``None``, and nested ``{name, args}`` specs (the registry builds
those, and checks their own arguments). In a ``Union``, a class that a config cannot hold (``Tensor`` in
``float | Tensor``) accepts its instances only.

Example::

    check_argument_types(TripletLossWithMiner, {"margin": "abc"}, "criterion.args.")
    # ConfigError: criterion.args.margin: expected float, got 'abc'

No string a config gives is a Python import path (``"os:system"``): configs name registered components only, and
nothing they hold is imported (:func:`check_no_import_paths`; ``plugin:name``, a qualified component name, is
fine).
"""

from __future__ import annotations

import collections.abc
import inspect
import numbers
import re
import types
import typing
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from oml_core.registry.errors import ConfigError
from oml_core.registry.kinds import component_of
from oml_core.registry.specs import is_spec, type_hints

#: Origins of the annotations whose values a config gives as a list.
_SEQUENCE_ORIGINS = (
    list,
    tuple,
    set,
    frozenset,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Set,
    collections.abc.MutableSet,
)
#: Origins of the annotations that any iterable but a string or a mapping fits.
_ITERABLE_ORIGINS = (collections.abc.Iterable, collections.abc.Collection)
#: Origins of the annotations whose values a config gives as a mapping.
_MAPPING_ORIGINS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_UNION_ORIGINS = (typing.Union, types.UnionType)
#: The shape of a Python import path ``package.module:attr`` (dotted identifiers on both sides of one ``:``).
IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def check_argument_types(factory: Callable[..., Any], args: Mapping[str, Any], where: str) -> None:
    """Raise a ``ConfigError`` for the first argument of ``args`` whose value does not fit the annotation of
    its parameter of ``factory`` (see the module's docstring for what is checked).

    Args:
        factory: A class (its ``__init__``'s annotations are read) or a function.
        args: The config's arguments, by name; names that are not parameters are not checked here (the
            registry reports them as unexpected).
        where: The start of the message, followed by the argument's name: ``"criterion.args."`` (a config key
            path) or ``"loss 'triplet_with_miner': argument "``.

    Raises:
        ConfigError: ``<where><name>: expected <annotation>, got <value>``, e.g.
            ``criterion.args.margin: expected float, got 'abc'``.
    """
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature (some builtins): nothing to check against
        return
    hints = type_hints(factory)
    var_keyword = next((p for p in parameters.values() if p.kind is p.VAR_KEYWORD), None)
    for name, value in args.items():
        parameter = parameters.get(name)
        if parameter is not None and parameter.kind in (parameter.POSITIONAL_ONLY, parameter.VAR_POSITIONAL):
            continue
        if parameter is None or parameter.kind is parameter.VAR_KEYWORD:
            parameter = var_keyword
        if parameter is None or parameter.name not in hints or is_spec(value):
            continue
        if value is None and parameter.default is None:  # the default restated (`x: float = None` included)
            continue
        annotation = hints[parameter.name]
        if not fits(annotation, value):
            raise ConfigError(f"{where}{name}: expected {describe(annotation)}, got {value!r}")


def is_import_path(value: Any, plugins: Collection[str]) -> bool:
    """Whether ``value`` is a Python import path, a string ``package.module:attr`` (:data:`IMPORT_PATH`), whose
    part before ``:`` is not one of ``plugins`` (the names of the loaded plugins: ``plugin:name`` is a qualified
    component name, looked up in the registry)."""
    return (
        isinstance(value, str)
        and IMPORT_PATH.fullmatch(value) is not None
        and value.partition(":")[0] not in plugins
    )


def check_no_import_paths(
    factory: Callable[..., Any], args: Mapping[str, Any], where: str, plugins: Collection[str]
) -> None:
    """Refuse a Python import path among a component's config arguments: configs name registered components
    only, and nothing a config holds is ever imported (:func:`is_import_path`).

    Every string in ``args`` is looked at, in lists and mappings and in the ``args`` of nested ``{name, args}``
    specs, but for the arguments annotated with :class:`~oml_core.registry.kinds.ComponentOf` (the registry looks
    their strings up as names) and the ``name`` of a nested spec (a name, looked up by whoever builds it).

    Args:
        factory: The component's factory (its annotations tell the ``ComponentOf`` arguments).
        args: The config's arguments, by name.
        where: The start of the message, followed by the argument's name (as in :func:`check_argument_types`).
        plugins: The names of the loaded plugins.

    Raises:
        ConfigError: ``<where><name>: 'os:system' is not a registered component; ...``, naming the value's place
            inside the argument (``criterion.args.distance.args.fn``, ``extractor.args.layers[1]``).
    """
    hints = type_hints(factory)
    for name, value in args.items():
        if component_of(hints.get(name)) is not None:
            continue
        for place, text in _strings(value, f"{where}{name}"):
            if is_import_path(text, plugins):
                raise ConfigError(
                    f"{place}: {text!r} is not a registered component; configs name registered components only, "
                    f"and a 'module:attr' string from a config is never imported"
                )


def _strings(value: Any, place: str) -> Iterator[tuple[str, str]]:
    """``(place, string)`` of every string in ``value`` (lists, mappings, a nested spec's ``args`` but not its
    ``name``), each with its place under ``place``."""
    if isinstance(value, str):
        yield place, value
    elif is_spec(value):
        yield from _strings(value.get("args") or {}, f"{place}.args")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{place}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, f"{place}[{index}]")


def fits(annotation: Any, value: Any) -> bool:
    """Whether a config ``value`` fits ``annotation``; True for an annotation that is not checked."""
    annotation = _unwrapped(annotation)
    if annotation is None or annotation is type(None):
        return value is None
    primitive = _primitive(annotation)
    if primitive is not None:
        return primitive(value)
    origin = typing.get_origin(annotation) or annotation
    arguments = typing.get_args(annotation)
    if origin is typing.Literal:
        return any(type(value) is type(option) and value == option for option in arguments)
    if origin in _UNION_ORIGINS:
        if not any(_is_checked(member) for member in arguments if member is not type(None)):
            return True
        return any(_member_fits(member, value) for member in arguments)
    if origin in _MAPPING_ORIGINS:
        if not isinstance(value, Mapping):
            return False
        key_type, value_type = arguments if len(arguments) == 2 else (Any, Any)
        return all(fits(key_type, k) and fits(value_type, v) for k, v in value.items())
    if origin in _SEQUENCE_ORIGINS or origin in _ITERABLE_ORIGINS:
        if isinstance(value, str | bytes | Mapping):
            return False
        if isinstance(value, list | tuple | set | frozenset):
            return _items_fit(origin, arguments, list(value))
        # another iterable (a range, a generator given in code): its items are not looked at
        wanted = collections.abc.Iterable if origin in _ITERABLE_ORIGINS else collections.abc.Sequence
        return isinstance(value, wanted)
    return True  # a class a config cannot hold, a callable, a type variable, ...


def describe(annotation: Any) -> str:
    """``annotation`` as messages name it: ``float``, ``int or None``, ``list[int]``, ``'mean' or 'sum'``."""
    annotation = _unwrapped(annotation)
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is typing.Literal:
        return " or ".join(repr(option) for option in arguments)
    if origin in _UNION_ORIGINS:
        return " or ".join(describe(member) for member in arguments)
    if annotation is None or annotation is type(None):
        return "None"
    if origin is not None and arguments:
        inner = ", ".join("..." if a is Ellipsis else describe(a).replace(" or ", " | ") for a in arguments)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(annotation, "__name__", str(annotation))


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


_PRIMITIVES: dict[Any, Callable[[Any], bool]] = {
    bool: lambda value: isinstance(value, bool),
    int: _is_int,
    float: _is_number,
    str: lambda value: isinstance(value, str),
    Any: lambda value: True,
    object: lambda value: True,
}


def _primitive(annotation: Any) -> Callable[[Any], bool] | None:
    """The check of a primitive annotation (``int``, ``float``, ``bool``, ``str``, ``Any``), else None."""
    try:
        return _PRIMITIVES.get(annotation)
    except TypeError:  # an unhashable annotation
        return None


def _unwrapped(annotation: Any) -> Any:
    """``Annotated[X, ...]`` and ``NewType``s as ``X``."""
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif hasattr(annotation, "__supertype__"):
            annotation = annotation.__supertype__
        else:
            return annotation


def _is_checked(annotation: Any) -> bool:
    """Whether :func:`fits` checks values of ``annotation`` (a type a config holds), rather than accepting all."""
    annotation = _unwrapped(annotation)
    if _primitive(annotation) is not None:
        return annotation not in (Any, object)
    origin = typing.get_origin(annotation) or annotation
    if origin is typing.Literal or origin in _MAPPING_ORIGINS:
        return True
    if origin in _SEQUENCE_ORIGINS or origin in _ITERABLE_ORIGINS:
        return True
    if origin in _UNION_ORIGINS:
        return any(_is_checked(member) for member in typing.get_args(annotation))
    return annotation is None or annotation is type(None)


def _member_fits(member: Any, value: Any) -> bool:
    """Whether ``value`` fits one member of a checked union: a class a config cannot hold takes its instances."""
    if _is_checked(member):
        return fits(member, value)
    origin = typing.get_origin(member) or member
    if inspect.isclass(origin):
        try:
            return isinstance(value, origin)
        except TypeError:  # a class that refuses isinstance (a protocol without runtime checks)
            return True
    return True


def _items_fit(origin: Any, arguments: tuple[Any, ...], items: list[Any]) -> bool:
    """Whether the items of a list fit the arguments of a sequence annotation (``tuple[X, Y]`` by position)."""
    if origin is tuple and arguments and not (len(arguments) == 2 and arguments[1] is Ellipsis):
        if arguments == ((),):  # tuple[()]
            return not items
        return len(items) == len(arguments) and all(fits(a, item) for a, item in zip(arguments, items))
    item_type = arguments[0] if arguments else Any
    return all(fits(item_type, item) for item in items)


__all__ = [
    "IMPORT_PATH",
    "check_argument_types",
    "check_no_import_paths",
    "describe",
    "fits",
    "is_import_path",
]
