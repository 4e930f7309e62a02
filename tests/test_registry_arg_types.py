"""A component's config arguments are checked against its factory's annotations before it is built: a value of
the wrong type is a one-line ``ConfigError`` naming the argument (the config key path, or the kind and name)."""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
import torch
from torch import nn

from oml_core import hookimpl
from oml_core.interfaces.miners import ITripletsMiner
from oml_core.registry import ConfigError, Registry
from oml_core.registry.arg_types import check_argument_types, describe
from oml_core.registry.registry import check_spec_argument_types
from oml_core.registry.specs import type_hints


class Opaque:
    """A class a config cannot hold."""


def factory(
    ratio: float = 0.5,
    count: int = 1,
    flag: bool = False,
    label: str = "a",
    maybe: float | None = None,
    sloppy: float = None,  # type: ignore[assignment]  # a too narrow annotation: None is its default
    either: int | str = 1,
    mode: Literal["mean", "sum"] = "mean",
    ks: list[int] = (),  # type: ignore[assignment]
    fractions: Sequence[float] = (),
    pair: tuple[int, str] = (0, ""),
    many: tuple[int, ...] = (),
    names: Iterable[str] = (),
    table: Mapping[str, int] | None = None,
    path: Path | None = None,
    tensor_or_float: float | torch.Tensor = 0.1,
    opaque: Opaque | None = None,
    anything: Any = None,
    untyped=None,
    *,
    only_keyword: int = 0,
    **extra: int,
) -> None:
    """Every kind of annotation the check knows."""


def positional_only(x: int, /, y: int = 0) -> None:
    """``x`` cannot be given by name: the registry reports it, not the type check."""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"ratio": "abc"}, "ratio: expected float, got 'abc'"),
        ({"ratio": True}, "ratio: expected float, got True"),
        ({"count": 2.0}, "count: expected int, got 2.0"),
        ({"count": False}, "count: expected int, got False"),
        ({"flag": 1}, "flag: expected bool, got 1"),
        ({"label": 3}, "label: expected str, got 3"),
        ({"maybe": "x"}, "maybe: expected float or None, got 'x'"),
        ({"sloppy": "x"}, "sloppy: expected float, got 'x'"),
        ({"either": 1.5}, "either: expected int or str, got 1.5"),
        ({"mode": "max"}, "mode: expected 'mean' or 'sum', got 'max'"),
        ({"ks": [1, "2"]}, "ks: expected list[int], got [1, '2']"),
        ({"ks": 3}, "ks: expected list[int], got 3"),
        ({"fractions": "0.5"}, "fractions: expected Sequence[float], got '0.5'"),
        ({"pair": [1, 2]}, "pair: expected tuple[int, str], got [1, 2]"),
        ({"pair": [1]}, "pair: expected tuple[int, str], got [1]"),
        ({"many": [1, None]}, "many: expected tuple[int, ...], got [1, None]"),
        ({"names": [1]}, "names: expected Iterable[str], got [1]"),
        ({"table": {"a": "b"}}, "table: expected Mapping[str, int] or None, got {'a': 'b'}"),
        ({"table": [1]}, "table: expected Mapping[str, int] or None, got [1]"),
        ({"tensor_or_float": "abc"}, "tensor_or_float: expected float or Tensor, got 'abc'"),
        ({"only_keyword": "1"}, "only_keyword: expected int, got '1'"),
        ({"something_else": "1"}, "something_else: expected int, got '1'"),  # **extra: int
    ],
)
def test_a_value_of_the_wrong_type_is_named_with_what_is_expected(args, message):
    with pytest.raises(ConfigError) as error:
        check_argument_types(factory, args, "key.args.")
    assert str(error.value) == f"key.args.{message}"


@pytest.mark.parametrize(
    "args",
    [
        {"ratio": 1},  # an int where a float is expected
        {"ratio": 0.25, "count": 3, "flag": True, "label": "b"},
        {"maybe": None, "sloppy": None},  # None given where None is the default
        {"either": "x", "mode": "sum", "ks": [1, 2], "fractions": (0.1, 1), "pair": [1, "a"], "many": []},
        {"names": ("a", "b"), "table": {"a": 1}, "path": "/some/where", "opaque": "whatever"},
        {"names": (name for name in ["a", "b"])},  # an iterable given in code
        {"tensor_or_float": torch.tensor(0.1), "anything": object(), "untyped": "x"},
        {"count": {"name": "some_component", "args": {}}},  # a nested spec: the registry builds it
    ],
)
def test_values_that_fit_and_what_is_not_checked_pass(args):
    check_argument_types(factory, args, "key.args.")


def test_positional_only_parameters_and_factories_without_a_signature_are_not_checked():
    check_argument_types(positional_only, {"x": "not checked here"}, "")
    with pytest.raises(ConfigError, match="^y: expected int, got 'a'$"):
        check_argument_types(positional_only, {"y": "a"}, "")
    check_argument_types(dict, {"anything": "goes"}, "")


def test_string_annotations_are_resolved_and_unresolvable_ones_skipped():
    namespace: dict[str, Any] = {}
    exec(  # a module with postponed annotations, one of which names nothing
        "from __future__ import annotations\n"
        "def make(a: float, b: NoSuchName, c: list[int] | None = None):\n"
        "    pass\n",
        namespace,
    )
    make = namespace["make"]
    with pytest.raises(NameError):
        typing.get_type_hints(make)
    assert type_hints(make) == {"a": float, "c": list[int] | None}
    check_argument_types(make, {"b": "anything"}, "")
    with pytest.raises(ConfigError, match=r"^c: expected list\[int\] or None, got \[0.5\]$"):
        check_argument_types(make, {"a": 1, "c": [0.5]}, "")


def test_describe():
    assert describe(float) == "float"
    assert describe(int | None) == "int or None"
    assert describe(typing.Optional[typing.Union[int, str]]) == "int or str or None"  # noqa: UP007, UP045
    assert describe(dict[str, list[int | None]]) == "dict[str, list[int | None]]"
    assert describe(Literal["a", 1]) == "'a' or 1"


# ------------------------------------------------------------------------------------------ the registry
class Miner(ITripletsMiner):
    def __init__(self, k: int = 1):
        self.k = k

    def sample(self, features, labels):
        return features, features, features


class Loss(nn.Module):
    def __init__(self, margin: float, miner: ITripletsMiner | None = None, reduction: str = "mean"):
        super().__init__()
        self.margin, self.miner = margin, miner


class Plugin:
    @hookimpl
    def oml_register_losses(self, register):
        register("typed", Loss)

    @hookimpl
    def oml_register_miners(self, register):
        register("typed_miner", Miner)


@pytest.fixture
def registry() -> Registry:
    return Registry([Plugin()], load_entrypoints=False)


def test_the_registry_names_kind_name_and_argument_before_building(registry):
    with pytest.raises(ConfigError) as error:
        registry.build("loss", {"name": "typed", "args": {"margin": "abc"}})
    assert str(error.value) == "loss 'typed': argument margin: expected float, got 'abc'"

    spec = {"name": "typed", "args": {"margin": 0.1, "miner": {"name": "typed_miner", "args": {"k": "2"}}}}
    with pytest.raises(ConfigError) as error:
        registry.build("loss", spec)
    assert str(error.value) == "miner 'typed_miner': argument k: expected int, got '2'"

    model = nn.Linear(2, 2)
    with pytest.raises(ConfigError) as error:
        registry.build("optimizer", {"name": "adam", "args": {"lr": "abc"}}, params=model.parameters())
    assert str(error.value) == "optimizer 'adam': argument lr: expected float or Tensor, got 'abc'"

    loss = registry.build("loss", {"name": "typed", "args": {"margin": 1, "miner": {"name": "typed_miner"}}})
    assert (loss.margin, loss.miner.k) == (1, 1)


def test_a_spec_is_checked_with_its_config_key_path_nested_specs_included(registry):
    spec = {"name": "typed", "args": {"margin": 0.1, "miner": {"name": "typed_miner", "args": {"k": 2}}}}
    check_spec_argument_types(registry, "loss", spec, "criterion")
    check_spec_argument_types(registry, "loss", "typed", "criterion")  # a bare name: nothing to check

    with pytest.raises(ConfigError) as error:
        check_spec_argument_types(registry, "loss", {"name": "typed", "args": {"margin": "abc"}}, "criterion")
    assert str(error.value) == "criterion.args.margin: expected float, got 'abc'"

    spec["args"]["miner"]["args"]["k"] = 0.5
    with pytest.raises(ConfigError) as error:
        check_spec_argument_types(registry, "loss", spec, "criterion")
    assert str(error.value) == "criterion.args.miner.args.k: expected int, got 0.5"
