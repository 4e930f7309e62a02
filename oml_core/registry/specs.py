"""The shape of a component's config, a ``{name, args}`` spec, and what the registry reads off a factory to build
the specs nested in its arguments: the kinds of its arguments (by name, alias, annotation or
:class:`~oml_core.registry.kinds.ComponentOf`) and their resolved annotations."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from oml_core.registry.kinds import ARGUMENT_ALIASES, KINDS, component_of
from oml_core.utils.imports import resolve

SPEC_KEYS = frozenset({"name", "args"})


def to_plain(cfg: Any) -> Any:
    """Turn an omegaconf ``DictConfig``/``ListConfig`` into plain containers (other values unchanged)."""
    if type(cfg).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(cfg, resolve=True)
    return cfg


def is_spec(value: Any) -> bool:
    """True for a ``{name: str, args: {...}}`` mapping (``args`` optional), the shape of a component config."""
    return isinstance(value, Mapping) and isinstance(value.get("name"), str) and set(value) <= SPEC_KEYS


#: A factory's attribute naming the arguments it builds itself from ``{name, args}`` specs (a set of names):
#: :meth:`Registry.build` passes those specs to it unbuilt instead of building them as oml components.
SELF_BUILT_ARGS_ATTR = "oml_self_built_args"


def type_hints(factory: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of ``factory``'s parameters (of ``__init__`` for a class), string annotations
    (``from __future__ import annotations``) evaluated, ``Annotated`` kept; one that cannot be evaluated is left
    out."""
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        return typing.get_type_hints(target, include_extras=True)  # Annotated kept: ComponentOf is read
    except Exception:  # one unresolvable annotation: resolve the others one by one
        pass
    namespace = getattr(inspect.unwrap(target), "__globals__", {})
    hints: dict[str, Any] = {}
    for name, annotation in getattr(target, "__annotations__", {}).items():
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)  # what typing.get_type_hints does, one at a time
            except Exception:
                continue
        hints[name] = annotation
    return hints


def parameter_names(factory: Callable[..., Any]) -> set[str]:
    """The names of ``factory``'s parameters (of ``__init__`` for a class); none for a callable without a
    signature (some builtins)."""
    try:
        return set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return set()


def required_arguments(factory: Callable[..., Any]) -> list[str]:
    """The parameters of ``factory`` that a keyword call must give: those without a default, but ``*args`` and
    ``**kwargs`` (and positional-only ones, which a keyword call cannot give); none without a signature."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return []
    return [
        n
        for n, p in params.items()
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def nested_specs(
    factory: Callable[..., Any], args: Mapping[str, Any]
) -> Iterator[tuple[str, str | None, Any]]:
    """The arguments among ``args`` that are components for the registry to build (those a factory builds
    itself, its ``SELF_BUILT_ARGS_ATTR``, aside): ``(argument, kind, spec)`` of every ``{name, args}`` spec, the
    kind told by the argument's name or its annotation (None when neither tells it), and of every name (a
    string) given to an argument annotated with :class:`~oml_core.registry.kinds.ComponentOf`."""
    hints = type_hints(factory)
    self_built: Collection[str] = getattr(factory, SELF_BUILT_ARGS_ATTR, frozenset())
    for name, value in args.items():
        if name in self_built:
            continue
        if is_spec(value) or (isinstance(value, str) and component_of(hints.get(name)) is not None):
            yield name, _kind_of_argument(name, hints.get(name)), value


def _kind_of_argument(arg_name: str, annotation: Any) -> str | None:
    """The kind a nested spec argument holds: by its annotation's :class:`~oml_core.registry.kinds.ComponentOf`,
    its name, or the interface in its annotation."""
    referenced = component_of(annotation)
    if referenced is not None:
        return referenced
    if arg_name in KINDS:
        return arg_name
    if arg_name in ARGUMENT_ALIASES:
        return ARGUMENT_ALIASES[arg_name]
    candidates = typing.get_args(annotation) or (annotation,)
    for kind in KINDS.values():
        if kind.interface is None or kind.interface.startswith(("torch", "pytorch_lightning")):
            continue  # no component of these is told by a torch or Lightning class: not imported for nothing
        interface = resolve(kind.interface)
        if any(inspect.isclass(c) and issubclass(c, interface) for c in candidates):
            return kind.name
    return None


__all__ = [
    "SELF_BUILT_ARGS_ATTR",
    "SPEC_KEYS",
    "is_spec",
    "nested_specs",
    "parameter_names",
    "to_plain",
    "type_hints",
]
