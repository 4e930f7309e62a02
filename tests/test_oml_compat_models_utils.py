"""OML 4.0's ``oml.models.utils`` (at ``oml_core.models.utils``, from ``oml_core.utils.state_dicts``) and the
type aliases of ``oml.interfaces.miners`` / ``oml.interfaces.metrics``, on hand-computed cases."""

from __future__ import annotations

import logging

import pytest
import torch
from oml_core.models.utils import (
    filter_state_dict,
    find_prefix_in_state_dict,
    remove_criterion_in_state_dict,
    remove_prefix_from_state_dict,
)

from oml_core.interfaces.metrics import TIndices
from oml_core.interfaces.miners import TLabels, TTriplets, TTripletsIds, labels2list
from oml_core.utils import state_dicts


def test_the_oml_path_forwards_to_the_core_module():
    assert remove_prefix_from_state_dict is state_dicts.remove_prefix_from_state_dict


def test_remove_prefix_found_before_the_trial_key(caplog):
    weights = {"model.layer4.w": 1, "model.fc.b": 2}
    with caplog.at_level(logging.INFO, logger="oml_core"):
        result = remove_prefix_from_state_dict(weights, "layer4")
    assert result is weights and weights == {"layer4.w": 1, "fc.b": 2}  # in place, as OML's
    assert "Prefix <model.> was removed from the state dict." in caplog.text
    assert remove_prefix_from_state_dict({"layer4": 1}, "layer4") == {"layer4": 1}  # no prefix
    # a stripped key equal to another prefixed key: both kept, renamed at once
    assert remove_prefix_from_state_dict({"aab": 1, "ab": 2}, "ab") == {"ab": 1, "b": 2}
    assert find_prefix_in_state_dict({"m.m.fc": 1}, "fc") == "m.m."


def test_remove_prefix_errors_are_also_assertion_errors():
    with pytest.raises(
        AssertionError, match=r"^no key of the state dict holds 'layer4'; the keys are \['fc'\]$"
    ):
        remove_prefix_from_state_dict({"fc": 1}, "layer4")
    with pytest.raises(ValueError, match=r"the keys \['head.w'\] do not start with the prefix 'model.'"):
        remove_prefix_from_state_dict({"model.layer4": 1, "head.w": 2}, "layer4")


def test_remove_criterion_and_filter():
    weights = {"fc": 1, "criterion.weight": 2, "speaker_loss.weight": 3}
    assert remove_criterion_in_state_dict(weights) == {"fc": 1}
    assert filter_state_dict({"a": 1, "b": 2, "c": 3}, ["a", "c", "z"]) == {"a": 1, "c": 3}


def test_interface_type_aliases_and_labels2list():
    assert TLabels == list[int] | torch.Tensor and TIndices == torch.LongTensor | list[int]
    assert TTriplets == tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    assert TTripletsIds == tuple[list[int], list[int], list[int]]
    labels = [1, 2]
    copied = labels2list(labels)
    assert copied == [1, 2] and copied is not labels
    assert labels2list(torch.tensor([[3], [4]])) == [3, 4]
    with pytest.raises(TypeError, match="^labels must be a list or a tensor, got tuple$"):
        labels2list((1, 2))  # type: ignore[arg-type]
