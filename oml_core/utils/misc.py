"""OML's small helpers of ``oml.utils.misc``, under OML's names, signatures and defaults: seeding, dictionaries,
sampling, padding, drawing a text, a temporary matplotlib backend.

Code written for OML imports them with only ``oml`` -> ``oml_core``:
``from oml_core.utils.misc import set_global_seed, flatten_dict, one_hot``. Where OML checks an argument with
``assert``, the error here is an :class:`~oml_core.utils.errors.OmlValueError` (a ``ValueError`` and an
``AssertionError``). matplotlib and omegaconf are imported only by the functions that need them.
"""

from __future__ import annotations

import inspect
import os
import random
import sys
import textwrap
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont
from torch import Tensor

from oml_core.const import BLACK, TColor
from oml_core.utils.checks import is_int
from oml_core.utils.errors import OmlValueError

#: The largest seed :func:`set_global_seed` takes (numpy's global generator takes ``[0, 2**32 - 1]``).
MAX_SEED = 2**32 - 1
#: The side (pixels) of the picture of :func:`visualize_text` (OML's: 256).
TEXT_IMAGE_SIZE = 256
#: :func:`visualize_text` wraps the text at this many characters per line and shows this many lines at most
#: (the last one ends with ``...`` when the text is cut).
CHARS_PER_LINE = 34
MAX_LINES = 16
#: The width (pixels) of the frame of :func:`visualize_text`.
TEXT_FRAME = 4


class CompatibilityError(Exception):
    """A callable has none of the argument names :func:`adapt_argument_as_kwarg` tried."""


def adapt_argument_as_kwarg(obj: Callable[..., Any], candidates: list[str], value: Any) -> dict[str, Any]:
    """``{name: value}`` for the first of ``candidates`` that is a parameter of ``obj``'s signature (to pass
    ``value`` to callables that name the same argument differently).

    Raises:
        CompatibilityError: no candidate is a parameter of ``obj``; the message lists both.
    """
    parameters = list(inspect.signature(obj).parameters)
    for name in candidates:
        if name in parameters:
            return {name: value}
    raise CompatibilityError(
        f"Not compatible signature for {obj}. Candidates: {candidates}, available arguments: {parameters}"
    )


def find_value_ids(it: Iterable[Any], value: Any) -> list[int]:
    """The positions of every element of ``it`` equal to ``value``, ascending (a numpy array is compared at
    once, anything else element by element)."""
    if isinstance(it, np.ndarray):
        return [int(i) for i in np.flatnonzero(it == value)]
    return [i for i, element in enumerate(it) if element == value]


def set_global_seed(seed: int) -> None:
    """Seed every global random generator, as OML's ``set_global_seed``:

    - python's ``random``, numpy's global generator (``np.random``) and torch's (``torch.manual_seed``, which
      seeds the CUDA generators of every device too);
    - when CUDA is available, also ``torch.cuda.manual_seed_all`` and cuDNN set to deterministic kernels
      (``torch.backends.cudnn.deterministic = True``, ``benchmark = False``), as OML does;
    - ``os.environ["PL_SEED_WORKERS"] = "1"``: Lightning then seeds every dataloader worker from it.

    OML also seeds a TPU's generator when ``torch_xla`` is installed; oml runs on CPUs and CUDA devices only.
    A run's own generators (samplers, shuffling) are seeded from its config, not from here.

    Raises:
        ValueError: ``seed`` is not an integer within ``[0, 2**32 - 1]`` (numpy's range).
    """
    if not is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer within [0, {MAX_SEED}], got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    os.environ["PL_SEED_WORKERS"] = "1"


def one_hot(i: int, dim: int) -> Tensor:
    """A float ``[dim]`` tensor of zeros with a ``1`` at position ``i`` (negative ``i`` counts from the end).

    Raises:
        IndexError: ``i`` is out of ``[-dim, dim)``.
    """
    vector = torch.zeros(dim)
    vector[i] = 1
    return vector


def flatten_dict(
    d: Mapping[Any, Any], parent_key: str = "", sep: str = "/", ignored_keys: Iterable[str] = ()
) -> dict[str, Any]:
    """Nested mappings flattened into one level whose keys join the keys of every level with ``sep``:
    ``{"a": {"b": 1}, "c": 2}`` -> ``{"a/b": 1, "c": 2}``. Values are kept as they are (see
    :func:`oml_core.metrics.embeddings.flatten_metrics` for metrics turned into floats).

    Args:
        d: The mapping.
        parent_key: A prefix of every key (``parent_key + sep + key``), none when empty.
        sep: The separator.
        ignored_keys: Keys left out, with everything under them, at any level.
    """
    ignored = set(ignored_keys)
    flat: dict[str, Any] = {}
    for key, value in d.items():
        if key in ignored:
            continue
        new_key = f"{parent_key}{sep}{key}" if parent_key else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten_dict(value, new_key, sep=sep, ignored_keys=ignored))
        else:
            flat[new_key] = value
    return flat


def _is_omegaconf_container(value: Any) -> bool:
    """Whether ``value`` is an omegaconf ``DictConfig`` or ``ListConfig`` (without importing omegaconf: if it
    is not imported, nothing is one)."""
    omegaconf = sys.modules.get("omegaconf")
    return omegaconf is not None and isinstance(value, (omegaconf.DictConfig, omegaconf.ListConfig))


def dictconfig_to_dict(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A plain (nested) ``dict`` of a ``dict`` or an omegaconf ``DictConfig`` (interpolations resolved), so that
    it can be pickled, logged or compared.

    Raises:
        TypeError: ``cfg`` is not a mapping.
    """
    if _is_omegaconf_container(cfg):
        from omegaconf import OmegaConf  # omegaconf is loaded already: cfg is one of its containers

        cfg = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    if not isinstance(cfg, Mapping):
        raise TypeError(f"cfg must be a dict or a DictConfig, got {type(cfg).__name__}")
    return {
        key: dictconfig_to_dict(value) if isinstance(value, Mapping) else value for key, value in cfg.items()
    }


def smart_sample(array: list[Any], k: int) -> list[Any]:
    """``k`` items of ``array`` drawn with numpy's global generator: without repetition when ``array`` has at
    least ``k`` items; otherwise every item once (in random order) and ``k - len(array)`` more with repetition.

    Args:
        array: Distinct items to sample from.
        k: The number of items to draw.

    Raises:
        ValueError: ``array`` is empty while ``k > 0`` (numpy's message).
    """
    if len(array) < k:
        every_item = np.random.choice(array, size=len(array), replace=False).tolist()
        return every_item + np.random.choice(array, size=k - len(array), replace=True).tolist()
    return np.random.choice(array, size=k, replace=False).tolist()


def clip_max(arr: tuple[int, ...], max_el: int) -> tuple[int, ...]:
    """``arr`` with every element above ``max_el`` replaced by ``max_el``."""
    return tuple(min(x, max_el) for x in arr)


def remove_unused_kwargs(kwargs: dict[str, Any], function: Callable[..., Any]) -> dict[str, Any]:
    """The items of ``kwargs`` whose keys are parameters of ``function``'s signature (the rest is dropped:
    meant for calling several functions with one set of keyword arguments)."""
    parameters = inspect.signature(function).parameters
    return {key: value for key, value in kwargs.items() if key in parameters}


def check_if_nonempty_positive_integers(var: int | Sequence[int], name: str) -> None:
    """Check that ``var`` is a positive integer or a non-empty sequence of positive integers (no ``bool``).

    Raises:
        ValueError: it is not; the message names ``name``.
    """
    if isinstance(var, Sequence) and not isinstance(var, str):
        if not var or not all(is_int(x) and x > 0 for x in var):
            raise ValueError(
                f"{name} is expected to be non-empty and contain positive integers, but got {var}"
            )
    elif is_int(var):
        if var <= 0:
            raise ValueError(f"{name} is expected to be a positive integer, but got {var}")
    else:
        raise ValueError(f"Unsupported argument type. Expected int or Iterable[int], but got {type(var)}")


def _as_array(value: Any) -> np.ndarray:
    return np.asarray(value.detach().cpu().numpy() if isinstance(value, Tensor) else value)


def _equal_values(a: Any, b: Any) -> bool:
    """``a == b``; where either is a tensor or an array: the same shape and ``allclose`` (numbers, torch's
    default tolerances) or equal elements (other arrays). A python number equals a 0-d tensor of its value."""
    if not isinstance(a, (Tensor, np.ndarray)) and not isinstance(b, (Tensor, np.ndarray)):
        return bool(a == b)
    x, y = _as_array(a), _as_array(b)
    if x.shape != y.shape:
        return False
    numeric = np.issubdtype(x.dtype, np.number) and np.issubdtype(y.dtype, np.number)
    return bool(np.allclose(x, y)) if numeric else bool(np.array_equal(x, y))


def compare_dicts_recursively(d1: Mapping[Any, Any], d2: Mapping[Any, Any]) -> bool:
    """``True`` when the two (nested) dicts have the same keys at every level and equal values (tensors and
    arrays: same shape and ``allclose``, a number and a 0-d tensor alike); otherwise an ``AssertionError``
    saying where they differ, which a plain ``d1 == d2`` does not.

    Raises:
        AssertionError: the key sets differ at some level, or two values differ; the message gives the path
            of keys (``a/b``) and both values.
    """
    _compare_dicts(d1, d2, path="")
    return True


def _compare_dicts(d1: Mapping[Any, Any], d2: Mapping[Any, Any], path: str) -> None:
    where = f" at {path}" if path else ""
    if set(d1) != set(d2):
        raise AssertionError(
            f"The dictionaries keys are different{where}.\nDict_1 keys: {set(d1)}\nDict_2 keys: {set(d2)}"
        )
    for key, value in d1.items():
        key_path = f"{path}/{key}" if path else str(key)
        other = d2[key]
        if isinstance(value, Mapping) and isinstance(other, Mapping):
            _compare_dicts(value, other, key_path)
        elif not _equal_values(value, other):
            raise AssertionError(f"Key name: {key_path}\nDict_1 value: {value}\nDict_2 value: {other}")


def pad_array_right(arr: np.ndarray, required_len: int, val: float | int) -> np.ndarray:
    """The 1-D ``arr`` padded on the right with ``val`` up to ``required_len`` items (a new array).

    Raises:
        OmlValueError: ``arr`` is not 1-D, or longer than ``required_len`` (OML asserts both).
    """
    if arr.ndim != 1:
        raise OmlValueError(f"arr must be 1-D, got the shape {arr.shape}")
    if required_len < len(arr):
        raise OmlValueError(f"required_len ({required_len}) is below the length of arr ({len(arr)})")
    return np.pad(arr, (0, required_len - len(arr)), mode="constant", constant_values=val)


def visualize_text(
    text: str, color: TColor = BLACK, draw_bbox: bool = True, size: int = TEXT_IMAGE_SIZE
) -> np.ndarray:
    """``text`` drawn black on white as a ``size x size x 3`` uint8 picture (OML's ``visualize_text``; how the
    items of a text dataset are shown): wrapped at :data:`CHARS_PER_LINE` characters, at most
    :data:`MAX_LINES` lines (the last one ends with ``...`` when the text is cut), framed by ``color``
    (:data:`TEXT_FRAME` pixels) when ``draw_bbox``. A word longer than a line is cut across lines.

    Drawn with PIL's default font (OML draws with matplotlib: the pictures differ, the contract is the same).
    """
    lines = textwrap.wrap(text, CHARS_PER_LINE) or [""]
    if len(lines) > MAX_LINES:
        lines = [*lines[: MAX_LINES - 1], lines[MAX_LINES - 1][: CHARS_PER_LINE - 3] + "..."]
    white = (255, 255, 255)
    image = Image.new("RGB", (size, size), tuple(color) if draw_bbox else white)
    draw = ImageDraw.Draw(image)
    if draw_bbox:
        draw.rectangle((TEXT_FRAME, TEXT_FRAME, size - 1 - TEXT_FRAME, size - 1 - TEXT_FRAME), fill=white)
    origin = 2 * TEXT_FRAME
    draw.multiline_text((origin, origin), "\n".join(lines), fill=(0, 0, 0), font=ImageFont.load_default())
    return np.asarray(image, dtype=np.uint8).copy()


def html_blocks_to_grid(blocks: list[list[str]]) -> str:
    """HTML blocks laid out as a grid: every inner list is one row (a flex ``<div>`` of its blocks, left
    aligned), the rows one under another in one ``<div>``."""
    rows = ["<div style='display:flex; justify-content:left;'>" + "".join(row) + "</div>" for row in blocks]
    return "<div>" + "\n".join(rows) + "</div>"


@contextmanager
def matplotlib_backend(backend: str) -> Generator[None, None, None]:
    """Use the matplotlib ``backend`` (``"Agg"`` to draw without a display) inside the ``with`` block, then
    switch back to the one in use before, also when the block raises."""
    import matplotlib  # drawing only: the rest of this module does not need matplotlib

    previous = matplotlib.get_backend()
    try:
        matplotlib.use(backend)
        yield
    finally:
        matplotlib.use(previous)


__all__ = [
    "CompatibilityError",
    "adapt_argument_as_kwarg",
    "check_if_nonempty_positive_integers",
    "clip_max",
    "compare_dicts_recursively",
    "dictconfig_to_dict",
    "find_value_ids",
    "flatten_dict",
    "html_blocks_to_grid",
    "matplotlib_backend",
    "one_hot",
    "pad_array_right",
    "remove_unused_kwargs",
    "set_global_seed",
    "smart_sample",
    "visualize_text",
]
