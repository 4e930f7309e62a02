"""OML 4.0's ``oml.utils.misc`` at ``oml_core.utils.misc``: every name of OML's module, with OML's signatures,
checked on hand-computed cases."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import matplotlib
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from oml_core.const import RED
from oml_core.utils import misc
from oml_core.utils.misc import (
    CompatibilityError,
    adapt_argument_as_kwarg,
    check_if_nonempty_positive_integers,
    clip_max,
    compare_dicts_recursively,
    dictconfig_to_dict,
    find_value_ids,
    flatten_dict,
    html_blocks_to_grid,
    matplotlib_backend,
    one_hot,
    pad_array_right,
    remove_unused_kwargs,
    set_global_seed,
    smart_sample,
    visualize_text,
)
from oml_core.utils.rng_state import get_rng_state, set_rng_state

#: Every public name of OML 4.0's oml/utils/misc.py.
OML_NAMES = (
    "CompatibilityError",
    "adapt_argument_as_kwarg",
    "find_value_ids",
    "set_global_seed",
    "one_hot",
    "flatten_dict",
    "dictconfig_to_dict",
    "smart_sample",
    "clip_max",
    "remove_unused_kwargs",
    "check_if_nonempty_positive_integers",
    "compare_dicts_recursively",
    "pad_array_right",
    "visualize_text",
    "html_blocks_to_grid",
    "matplotlib_backend",
)


@pytest.fixture()
def global_rng() -> Iterator[None]:
    """The global generators, restored after a test that seeds or draws from them."""
    state = get_rng_state({})
    yield
    set_rng_state(state, {})


def test_every_name_of_oml_module_is_there():
    assert [name for name in OML_NAMES if not hasattr(misc, name)] == []


def test_set_global_seed_seeds_python_numpy_and_torch(global_rng, monkeypatch):
    monkeypatch.delenv("PL_SEED_WORKERS", raising=False)  # restored after the test
    set_global_seed(7)
    drawn = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    assert drawn == (random.random(), float(np.random.rand()), float(torch.rand(1)))
    assert os.environ["PL_SEED_WORKERS"] == "1"


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True, "3"])
def test_set_global_seed_refuses_what_numpy_cannot_take(seed, global_rng):
    with pytest.raises(ValueError, match=r"^seed must be an integer within \[0, 4294967295\], got "):
        set_global_seed(seed)


def test_one_hot():
    vector = one_hot(2, 4)
    assert vector.dtype == torch.float32 and vector.tolist() == [0.0, 0.0, 1.0, 0.0]
    assert one_hot(-1, 3).tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(IndexError):
        one_hot(4, 4)


def test_flatten_dict_joins_keys_and_leaves_values_alone():
    nested = {"a": {"b": 1, "c": {"d": [2]}}, "e": "x", "skip": {"f": 3}, 5: {"skip": 4, "g": 6}}
    assert flatten_dict(nested, ignored_keys=["skip"]) == {"a/b": 1, "a/c/d": [2], "e": "x", "5/g": 6}
    assert flatten_dict({"a": {"b": 1}}, parent_key="p", sep=".") == {"p.a.b": 1}
    assert flatten_dict({}) == {}


def test_dictconfig_to_dict_resolves_and_returns_plain_dicts():
    cfg = OmegaConf.create({"model": {"dim": "${dim}", "layers": [1, 2]}, "dim": 8})
    plain = dictconfig_to_dict(cfg)
    assert plain == {"model": {"dim": 8, "layers": [1, 2]}, "dim": 8}
    assert type(plain) is dict and type(plain["model"]) is dict and type(plain["model"]["layers"]) is list
    # a dict holding a DictConfig
    assert dictconfig_to_dict({"a": OmegaConf.create({"b": 1})}) == {"a": {"b": 1}}
    with pytest.raises(TypeError, match="^cfg must be a dict or a DictConfig, got list$"):
        dictconfig_to_dict([1])  # type: ignore[arg-type]


def test_compare_dicts_recursively_says_where_they_differ():
    first = {"OVERALL": {"cmc": {1: torch.tensor(0.5), 5: 1.0}, "name": "x"}}
    same = {"OVERALL": {"cmc": {1: 0.5, 5: torch.tensor(1.0)}, "name": "x"}}
    assert compare_dicts_recursively(first, same) is True
    assert compare_dicts_recursively({"v": np.array([1.0, 2.0])}, {"v": torch.tensor([1.0, 2.0 + 1e-7])})
    with pytest.raises(
        AssertionError, match=r"Key name: OVERALL/cmc/1\nDict_1 value: 0.5\nDict_2 value: 0.25"
    ):
        compare_dicts_recursively({"OVERALL": {"cmc": {1: 0.5}}}, {"OVERALL": {"cmc": {1: 0.25}}})
    with pytest.raises(AssertionError, match=r"keys are different at OVERALL"):
        compare_dicts_recursively({"OVERALL": {"a": 1}}, {"OVERALL": {"b": 1}})
    with pytest.raises(AssertionError, match="Key name: v"):
        compare_dicts_recursively({"v": torch.zeros(2)}, {"v": torch.zeros(3)})


def test_find_value_ids_in_lists_and_arrays():
    assert find_value_ids([1, 2, 1, 3], 1) == [0, 2]
    assert find_value_ids(np.array(["a", "b", "a"]), "a") == [0, 2]
    assert find_value_ids([1, 2], 5) == []


def test_remove_unused_kwargs_keeps_the_parameters_of_the_function():
    def f(a: int, c: int = 0) -> int:
        return a + c

    assert remove_unused_kwargs({"a": 1, "b": 2, "c": 3}, f) == {"a": 1, "c": 3}


def test_adapt_argument_as_kwarg_takes_the_first_matching_name():
    def f(weights: str) -> str:
        return weights

    assert adapt_argument_as_kwarg(f, ["weights_path", "weights"], "w.pth") == {"weights": "w.pth"}
    with pytest.raises(
        CompatibilityError, match=r"Candidates: \['path'\], available arguments: \['weights'\]"
    ):
        adapt_argument_as_kwarg(f, ["path"], "w.pth")


def test_clip_max():
    assert clip_max((1, 5, 3), 3) == (1, 3, 3)
    assert clip_max((), 3) == ()


def test_check_if_nonempty_positive_integers():
    check_if_nonempty_positive_integers(3, "k")
    check_if_nonempty_positive_integers([1, 5], "k")
    for bad, message in (
        (0, "k is expected to be a positive integer, but got 0"),
        ([], r"k is expected to be non-empty and contain positive integers, but got \[\]"),
        ([1, 0], r"k is expected to be non-empty and contain positive integers, but got \[1, 0\]"),
        ([True], r"k is expected to be non-empty and contain positive integers, but got \[True\]"),
        (1.5, "Unsupported argument type"),
    ):
        with pytest.raises(ValueError, match=message):
            check_if_nonempty_positive_integers(bad, "k")  # type: ignore[arg-type]


def test_pad_array_right_and_its_errors_are_also_assertion_errors():
    assert pad_array_right(np.array([1.5, 2.0]), 4, -1).tolist() == [1.5, 2.0, -1.0, -1.0]
    assert pad_array_right(np.array([1, 2]), 2, 0).tolist() == [1, 2]
    with pytest.raises(AssertionError, match=r"required_len \(1\) is below the length of arr \(2\)"):
        pad_array_right(np.array([1, 2]), 1, 0)
    with pytest.raises(ValueError, match=r"arr must be 1-D, got the shape \(1, 2\)"):
        pad_array_right(np.array([[1, 2]]), 3, 0)


def test_smart_sample_draws_without_repetition_when_it_can(global_rng):
    np.random.seed(0)
    few = smart_sample(list(range(10)), k=4)
    assert len(few) == 4 and len(set(few)) == 4 and set(few) <= set(range(10))
    many = smart_sample([7, 8, 9], k=8)
    assert len(many) == 8 and set(many[:3]) == {7, 8, 9} and set(many) == {7, 8, 9}
    np.random.seed(0)
    assert smart_sample(list(range(10)), k=4) == few  # numpy's global generator, as OML


def test_visualize_text_draws_a_framed_text():
    image = visualize_text("Hello world", color=RED)
    assert image.shape == (256, 256, 3) and image.dtype == np.uint8
    # the frame: 4 pixels of the colour on every side
    for side in (image[:4], image[-4:], image[:, :4], image[:, -4:]):
        assert (side.reshape(-1, 3) == RED).all()
    inside = image[4:-4, 4:-4].reshape(-1, 3)
    assert (inside == 255).all(axis=1).any()  # a white background
    assert (inside < 128).all(axis=1).any()  # dark (anti-aliased black) text
    assert (inside[:, 0] == inside[:, 1]).all() and (inside[:, 1] == inside[:, 2]).all()  # grey levels only
    plain = visualize_text("Hello world", color=RED, draw_bbox=False, size=100)
    assert plain.shape == (100, 100, 3)
    assert not (plain.reshape(-1, 3) == RED).all(axis=1).any()  # no frame: no red pixel
    assert (plain[-1] == 255).all()  # the last row, below the text, is white


def test_visualize_text_cuts_a_long_text_with_dots():
    assert visualize_text("word " * 1000).shape == (256, 256, 3)  # 1000 words: 16 lines, the last ends "..."
    assert (visualize_text("x" * 5000, draw_bbox=False)[:, :, 0] < 255).any()  # one huge word: cut into lines


def test_html_blocks_to_grid():
    assert html_blocks_to_grid([["<a/>", "<b/>"], ["<c/>"]]) == (
        "<div><div style='display:flex; justify-content:left;'><a/><b/></div>\n"
        "<div style='display:flex; justify-content:left;'><c/></div></div>"
    )


def test_matplotlib_backend_is_restored_also_after_an_error():
    before = matplotlib.get_backend()
    with matplotlib_backend("Agg"):
        assert matplotlib.get_backend().lower() == "agg"
    assert matplotlib.get_backend() == before
    with pytest.raises(RuntimeError), matplotlib_backend("Agg"):
        raise RuntimeError("inside")
    assert matplotlib.get_backend() == before
