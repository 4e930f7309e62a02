"""The random state of a process (python's, numpy's, torch's and CUDA's global generators) and of named torch
generators, taken and restored in types that a ``weights_only`` checkpoint load accepts."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


def get_rng_state(generators: Mapping[str, torch.Generator]) -> dict[str, Any]:
    """The state of python's, numpy's and torch's global generators (CUDA's too when available) and of
    ``generators``, in types that a ``weights_only`` checkpoint load accepts (tensors, lists, ints)."""
    legacy = np.random.get_state(legacy=True)
    # the global generator is a MT19937, whose legacy state is the 5-tuple (a dict only for other bit generators)
    assert isinstance(legacy, tuple)
    kind, keys, position, has_gauss, cached_gaussian = legacy
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [kind, keys.tolist(), position, has_gauss, cached_gaussian],
        "torch": torch.get_rng_state(),
        "generators": {name: generator.get_state() for name, generator in generators.items()},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any], generators: Mapping[str, torch.Generator]) -> None:
    """Restore a state of :func:`get_rng_state` into the global generators and into ``generators``.

    Raises:
        KeyError: ``generators`` has a name that ``state`` has not (the run was set up differently).
    """
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, position, has_gauss, cached_gaussian = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached_gaussian))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    for name, generator in generators.items():
        if name not in state["generators"]:
            raise KeyError(
                f"the checkpoint has no state of the generator {name!r} (it has: {sorted(state['generators'])})"
            )
        generator.set_state(state["generators"][name])


__all__ = ["get_rng_state", "set_rng_state"]
