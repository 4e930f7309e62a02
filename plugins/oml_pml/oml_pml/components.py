"""Building PML's distances, reducers, regularizers and miners from config specs, and the factories' signatures.

A component argument (``distance``, ``reducer``, ``embedding_regularizer``, ``weight_regularizer`` and a miner's
``distance``) is given as one of:

- ``None``: PML's default;
- a class name of its PML module (``"CosineSimilarity"``): the class with its default arguments;
- a spec ``{name: <class name>, args: {...}}``; an argument of ``args`` that is itself a component argument
  (a miner's ``distance``, a regularizer's ``reducer``, ``PerAnchorReducer``'s ``reducer``) may be a spec too;
- an object already built (an instance of the module's base class).

An unknown class name raises a ``ValueError`` naming the argument, the name, the close matches and the known
names.

In a config built by the registry, a ``{name, args}`` value is a nested oml component unless the factory lists
the argument in its attribute :data:`oml_core.registry.SELF_BUILT_ARGS_ATTR`, which every factory here sets for
the component arguments: the registry then passes the spec to the factory, which builds it here.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from oml_core.registry import SELF_BUILT_ARGS_ATTR
from oml_pml.names import COMPONENT_ARGS, MINER_NAMES, MINERS

#: PML module of each component kind and the name of its base class.
_BASES = {
    "distances": "BaseDistance",
    "reducers": "BaseReducer",
    "regularizers": "BaseRegularizer",
    "miners": "BaseMiner",
    "losses": "BaseMetricLossFunction",
}
#: Parameters of a PML base class that its subclasses set themselves (never a user's argument): for every class,
#: and for some classes (``BatchHardMiner`` is ``BatchEasyHardMiner`` with both strategies "hard").
_INTERNAL_PARAMETERS = frozenset({"mat_based_loss"})
_SET_BY_CLASS = {"BatchHardMiner": frozenset({"pos_strategy", "neg_strategy"})}


def pml_module(module: str) -> Any:
    """``pytorch_metric_learning.<module>``."""
    return importlib.import_module(f"pytorch_metric_learning.{module}")


def pml_base(module: str) -> type:
    """The base class of the PML ``module``'s components (``BaseDistance`` for ``distances``)."""
    return getattr(pml_module(module), _BASES[module])


def known_classes(module: str) -> dict[str, type]:
    """``{name: class}`` of the concrete classes of the PML ``module`` that a spec may name (the miners: those
    of :data:`oml_pml.names.MINERS`)."""
    mod, base = pml_module(module), pml_base(module)
    if module == "miners":
        return {name: getattr(mod, name) for name in MINERS}
    return {
        name: obj
        for name, obj in vars(mod).items()
        if inspect.isclass(obj) and issubclass(obj, base) and not name.startswith("Base")
    }


def unknown_name_error(argument: str, name: str, known: list[str], where: str) -> ValueError:
    """The ``ValueError`` of an unknown class ``name`` given to ``argument``: close matches and known names."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return ValueError(
        f"{argument}: {name!r} is not a class of {where}.{hint} Known names: {', '.join(known)}."
    )


def split_spec(argument: str, spec: str | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(class name, args)`` of a component given as a name or as ``{name, args}``.

    Raises:
        ValueError: a mapping that is not ``{name: str, args: mapping}``.
    """
    if isinstance(spec, str):
        return spec, {}
    if not isinstance(spec.get("name"), str) or not set(spec) <= {"name", "args"}:
        raise ValueError(
            f"{argument}: expected a class name or {{name: <class>, args: {{...}}}}, got {spec!r}"
        )
    args = spec.get("args") or {}
    if not isinstance(args, Mapping):
        raise ValueError(f"{argument}: 'args' must be a mapping, got {args!r}")
    return spec["name"], dict(args)


def build_component(argument: str, value: Any, module: str | None = None) -> Any:
    """The PML component of ``argument`` (a key of :data:`oml_pml.names.COMPONENT_ARGS`, or the PML ``module``
    given) from ``value`` (see the module docstring); ``None`` stays ``None``.

    Raises:
        ValueError: an unknown class name or a malformed spec.
        TypeError: an object that is not a component of the module.
    """
    module = module or COMPONENT_ARGS[argument]
    if value is None:
        return None
    base = pml_base(module)
    if isinstance(value, base):
        return value
    if not isinstance(value, str | Mapping):
        raise TypeError(
            f"{argument}: expected a {base.__name__} of pytorch_metric_learning.{module}, a class name or a "
            f"{{name, args}} spec, got {type(value).__name__}"
        )
    name, args = split_spec(argument, value)
    classes = known_classes(module)
    if module == "miners":
        name = MINER_NAMES.get(name, name)  # the registered pml_ name of a miner works too
    if name not in classes:
        raise unknown_name_error(argument, name, sorted(classes), f"pytorch_metric_learning.{module}")
    for key in COMPONENT_ARGS.keys() & args.keys():
        args[key] = build_component(f"{argument}.args.{key}", args[key], COMPONENT_ARGS[key])
    return classes[name](**args)


def constructor_parameters(cls: type) -> list[inspect.Parameter]:
    """Every keyword argument of the PML class ``cls``: its own constructor's and, through ``**kwargs``, those
    of its bases (the reducer, distance, regularizers, ``collect_stats``), as keyword-only parameters with
    PML's defaults; a subclass's default wins over its base's."""
    params: dict[str, inspect.Parameter] = {}
    internal = _INTERNAL_PARAMETERS | _SET_BY_CLASS.get(cls.__name__, frozenset())
    for klass in inspect.getmro(cls):
        init = vars(klass).get("__init__")
        if init is None:
            continue
        if klass in (nn.Module, object):
            break
        forwards = False
        for param in list(inspect.signature(init).parameters.values())[1:]:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                forwards = True
            elif param.name not in params and param.name not in internal:
                params[param.name] = param.replace(kind=param.KEYWORD_ONLY)
        if not forwards:
            break
    return list(params.values())


def make_factory(
    name: str,
    module_name: str,
    parameters: list[inspect.Parameter],
    build: Callable[[dict[str, Any]], Any],
    doc: str,
    return_annotation: Any,
) -> Callable[..., Any]:
    """A factory function ``name`` of keyword-only ``parameters`` (its ``__signature__``, which the registry
    checks config arguments against) calling ``build`` with the arguments given (not the defaults)."""
    signature = inspect.Signature(parameters, return_annotation=return_annotation)

    def factory(**kwargs: Any) -> Any:
        try:
            bound = signature.bind(**kwargs)
        except TypeError as e:
            accepted = ", ".join(p.name for p in parameters)
            raise TypeError(f"{name}: {e}; it accepts: {accepted}") from None
        return build(dict(bound.arguments))

    factory.__name__ = factory.__qualname__ = name
    factory.__module__ = module_name
    factory.__doc__ = doc
    factory.__signature__ = signature  # type: ignore[attr-defined]
    factory.__annotations__ = {
        p.name: p.annotation for p in parameters if p.annotation is not inspect.Parameter.empty
    }
    setattr(factory, SELF_BUILT_ARGS_ATTR, frozenset(COMPONENT_ARGS) & {p.name for p in parameters})
    return factory


def component_annotation(module: str) -> Any:
    """The annotation of a component argument: ``Base<X> | dict | str | None`` (plain classes only: the registry
    looks for oml interfaces among them)."""
    return pml_base(module) | dict | str | None


def lazy_factories(
    module: str, names: Mapping[str, str], make: Callable[[str], Callable[..., Any]]
) -> tuple[Callable[[str], Callable[..., Any]], Callable[[str], Any], Callable[[], list[str]]]:
    """``(get, __getattr__, __dir__)`` of the module ``module`` whose registered factories (the keys of
    ``names``) are built by ``make(name)`` on first access (PEP 562) and then kept as module attributes; a
    factory the module defines itself is returned as it is.

    ``get(name)`` raises ``AttributeError`` for a name that is not registered.
    """

    def get(name: str) -> Callable[..., Any]:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        namespace = vars(sys.modules[module])
        if name not in namespace:
            namespace[name] = make(name)
        return namespace[name]

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module])) | set(names))

    return get, get, __dir__
