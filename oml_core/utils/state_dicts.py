"""OML's state-dict helpers of ``oml.models.utils`` (importable from ``oml_core.models.utils`` as in OML):
finding and removing the prefix that a wrapper put before every key, dropping a loss's weights, keeping
only some keys. Like OML's, they change the given dict in place and return it.

oml's own loading strips its known wrapper prefixes (:func:`oml_core.utils.checkpoints.strip_prefixes`);
these find the prefix from a key that should be there (``trial_key``).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

from oml_core.utils.errors import OmlValueError
from oml_core.utils.logs import get_logger

#: A state dict (OML's ``TStateDict``).
TStateDict = MutableMapping[str, Any]

#: The keys of the losses' weights that OML's training checkpoints may hold next to the model's.
CRITERION_KEYS = ("criterion.weight", "speaker_loss.weight")

logger = get_logger(__name__)


def find_prefix_in_state_dict(state_dict: TStateDict, trial_key: str) -> str:
    """The prefix before ``trial_key`` in the first key holding it (``"model."`` for ``trial_key="layer4"``
    and the key ``"model.layer4.0.weight"``), which every key must start with.

    Raises:
        OmlValueError: no key holds ``trial_key``, or some key does not start with the prefix (OML asserts
            both); the message lists the keys at fault.
    """
    holding = [key for key in state_dict if trial_key in key]
    if not holding:
        raise OmlValueError(f"no key of the state dict holds {trial_key!r}; the keys are {list(state_dict)}")
    prefix = holding[0][: holding[0].index(trial_key)]
    other = [key for key in state_dict if not key.startswith(prefix)]
    if other:
        raise OmlValueError(
            f"the keys {other} do not start with the prefix {prefix!r} found before {trial_key!r}"
        )
    return prefix


def remove_prefix_from_state_dict(state_dict: TStateDict, trial_key: str) -> TStateDict:
    """``state_dict`` with the prefix of :func:`find_prefix_in_state_dict` removed from every key, in place:
    ``{"model.layer4": w}`` -> ``{"layer4": w}`` for ``trial_key="layer4"``; unchanged when the prefix is empty.
    The removal is logged (OML prints it).

    Raises:
        OmlValueError: see :func:`find_prefix_in_state_dict`.
    """
    prefix = find_prefix_in_state_dict(state_dict, trial_key)
    if prefix:
        renamed = [(key[len(prefix) :], value) for key, value in state_dict.items()]
        state_dict.clear()
        state_dict.update(renamed)
        logger.info("Prefix <%s> was removed from the state dict.", prefix)
    return state_dict


def remove_criterion_in_state_dict(state_dict: TStateDict) -> TStateDict:
    """``state_dict`` without the losses' weights of :data:`CRITERION_KEYS`, in place."""
    for key in CRITERION_KEYS:
        state_dict.pop(key, None)
    return state_dict


def filter_state_dict(state_dict: TStateDict, needed_keys: Iterable[str]) -> TStateDict:
    """``state_dict`` with only the keys of ``needed_keys``, in place."""
    needed = set(needed_keys)
    for key in [key for key in state_dict if key not in needed]:
        del state_dict[key]
    return state_dict


__all__ = [
    "CRITERION_KEYS",
    "TStateDict",
    "filter_state_dict",
    "find_prefix_in_state_dict",
    "remove_criterion_in_state_dict",
    "remove_prefix_from_state_dict",
]
