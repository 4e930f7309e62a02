"""``RNGStateCallback``: the random state of a run is part of its checkpoints, so a resumed run goes on exactly
as the uninterrupted one would."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch

from oml_core.ddp.utils import get_rank_safe, get_world_size_safe, sync_dicts_ddp


def get_rng_state(generators: Mapping[str, torch.Generator]) -> dict[str, Any]:
    """The state of python's, numpy's and torch's global generators (CUDA's too when available) and of
    ``generators``, in types that a ``weights_only`` checkpoint load accepts (tensors, lists, ints)."""
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
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


class RNGStateCallback(pl.Callback):
    """Puts the random state into every checkpoint and restores it when training resumes from one.

    The state (see :func:`get_rng_state`) is that of python's, numpy's and torch's global generators and of the
    run's own ``generators`` (e.g. the sampler's), taken when the checkpoint is written, i.e. after the
    epoch's validation: nothing random happens between then and the next epoch. In DDP every process's state
    is gathered into the checkpoint (:func:`~oml_core.ddp.utils.sync_dicts_ddp`) and every process gets its
    own back (process 0's when the number of processes has changed).

    Args:
        generators: The generators to save and restore besides the global ones, by name.
    """

    def __init__(self, generators: Mapping[str, torch.Generator] | None = None) -> None:
        super().__init__()
        self.generators = dict(generators or {})

    def state_dict(self) -> dict[str, Any]:
        """``{"per_process": [state of process 0, state of process 1, ...]}``."""
        return sync_dicts_ddp({"per_process": [get_rng_state(self.generators)]}, get_world_size_safe())

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        states = state_dict["per_process"]
        rank = get_rank_safe()
        set_rng_state(states[rank] if rank < len(states) else states[0], self.generators)


__all__ = ["RNGStateCallback", "get_rng_state", "set_rng_state"]
