"""OML 4.0's names of ``oml.utils.misc_torch`` at ``oml_core.utils.misc_torch``, on hand-computed cases."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from oml_core.utils import indexing
from oml_core.utils import misc_torch as mt

#: Every public name of OML 4.0's oml/utils/misc_torch.py.
OML_NAMES = (
    "elementwise_dist",
    "pairwise_dist",
    "take_2d",
    "assign_2d",
    "cat_two_sorted_tensors_and_keep_it_sorted",
    "normalise",
    "get_device",
    "is_sorted_tensor",
    "TData",
    "unique_by_ids",
    "temporary_setting_model_mode",
    "OnlineCalc",
    "AvgOnline",
    "SumOnline",
    "OnlineDict",
    "OnlineAvgDict",
    "OnlineSumDict",
    "PCA",
    "TSingleValues",
    "TSequenceValues",
    "TOnlineValues",
)


def test_every_name_of_oml_module_is_there():
    assert [name for name in OML_NAMES if not hasattr(mt, name)] == []


def test_take_2d_and_assign_2d_are_those_of_indexing_with_assertion_errors():
    assert mt.take_2d is indexing.take_2d and mt.assign_2d is indexing.assign_2d
    x = torch.tensor([[0, 1, 2], [3, 5, 2]])
    assert mt.take_2d(x, torch.tensor([[2, 2, 0], [1, 0, 1]])).tolist() == [[2, 2, 0], [5, 3, 5]]
    assert mt.assign_2d(x.clone(), torch.tensor([[0], [2]]), torch.tensor([[9], [8]])).tolist() == [
        [9, 1, 2],
        [3, 5, 8],
    ]
    with pytest.raises(AssertionError, match=r"expected x \[N, M\] and indices \[N, P\]"):
        mt.take_2d(x, torch.tensor([0, 1]))


def test_normalise_divides_by_detached_norms():
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
    y = mt.normalise(x)
    assert torch.allclose(y, torch.tensor([[0.6, 0.8], [0.0, 0.0]]))  # a zero row stays zero (no NaN)
    y.sum().backward()
    # the norm is detached: d(x / |x|) / dx = 1 / |x| for the first row (OML's), 1 / NORM_EPS for the zero row
    assert torch.allclose(x.grad[0], torch.tensor([0.2, 0.2]))
    assert torch.allclose(mt.normalise(torch.tensor([[1.0, -3.0]]), p=1), torch.tensor([[0.25, -0.75]]))
    with pytest.raises(AssertionError, match=r"x must be \[n, d\], got the shape \(2,\)"):
        mt.normalise(torch.ones(2))


def test_is_sorted_tensor_tolerates_differences_below_the_dtype_precision():
    assert mt.is_sorted_tensor(torch.tensor([0.0, 1e-50, 2e-50, 1.0]))
    assert mt.is_sorted_tensor(torch.tensor([0.0, 3e-50, 2e-50, 1.0]))  # indistinguishable in float32
    assert not mt.is_sorted_tensor(torch.tensor([2.0, 3e-50, 1.0]))
    assert mt.is_sorted_tensor(torch.tensor([1, 1, 2])) and not mt.is_sorted_tensor(torch.tensor([2, 1]))
    assert mt.is_sorted_tensor(torch.tensor([5.0])) and mt.is_sorted_tensor(torch.tensor([]))
    with pytest.raises(ValueError, match="x must be one-dimensional"):
        mt.is_sorted_tensor(torch.zeros(2, 2))


def test_cat_two_sorted_tensors_scales_or_shifts_the_first_part_below_the_second():
    x1 = torch.tensor([[10.0, 20.0, 30.0], [-3.0, -2.0, -1.0], [1.0, 2.0, 3.0]])
    x2 = torch.tensor([[0.3, 0.4], [0.5, 0.6], [-1.0, 0.0]])
    kept = x1.clone()
    out = mt.cat_two_sorted_tensors_and_keep_it_sorted(x1, x2, eps=0.001)
    expected = torch.tensor(
        [
            [0.1 - 0.001, 0.2 - 0.001, 0.3 - 0.001, 0.3, 0.4],  # 30 > 0.3 > 0: scaled by 0.3 / 30
            [-3.0, -2.0, -1.0, 0.5, 0.6],  # already below: as it is
            [1.0 - 4.001, 2.0 - 4.001, 3.0 - 4.001, -1.0, 0.0],  # 3 > -1 <= 0: shifted by 3 - (-1) + eps
        ]
    )
    assert torch.allclose(out, expected)
    assert torch.equal(x1, kept)  # not modified (OML scales x1 in place)
    assert all(mt.is_sorted_tensor(row) for row in out)
    empty = torch.zeros(3, 0)
    assert mt.cat_two_sorted_tensors_and_keep_it_sorted(empty, x2) is x2
    assert mt.cat_two_sorted_tensors_and_keep_it_sorted(x1, empty) is x1
    with pytest.raises(AssertionError, match="eps must be >= 0"):
        mt.cat_two_sorted_tensors_and_keep_it_sorted(x1, x2, eps=-1)
    with pytest.raises(ValueError, match="the same number of rows, got 3 and 1"):
        mt.cat_two_sorted_tensors_and_keep_it_sorted(x1, x2[:1])


def test_unique_by_ids_keeps_the_first_record_of_every_id_in_id_order():
    ids = [3, 0, 1, 1, 0, 2]
    rows = torch.arange(12.0).view(6, 2)
    unique_ids, unique_rows = mt.unique_by_ids(ids, rows)
    assert unique_ids == [0, 1, 2, 3]
    assert unique_rows.tolist() == rows[[1, 2, 5, 0]].tolist()
    assert mt.unique_by_ids(ids, list("abcdef")) == ([0, 1, 2, 3], ["b", "c", "f", "a"])
    assert mt.unique_by_ids(ids, rows.numpy())[1].tolist() == unique_rows.tolist()
    with pytest.raises(AssertionError, match="ids and data must have the same length, got 6 and 2"):
        mt.unique_by_ids(ids, ["a", "b"])


def test_get_device_and_temporary_setting_model_mode():
    model = nn.Linear(2, 2).eval()
    assert mt.get_device(model) == "cpu"
    with mt.temporary_setting_model_mode(model, set_train=True) as same:
        assert same is model and model.training
    assert not model.training
    with pytest.raises(RuntimeError), mt.temporary_setting_model_mode(model, set_train=True):
        raise RuntimeError("inside")
    assert not model.training


def test_online_statistics():
    average = mt.AvgOnline([1.0, 2.0, 3.0])
    assert average.result == 2.0
    average.update(6.0)
    assert average.result == 3.0 and average.n == 4  # (1 + 2 + 3 + 6) / 4
    average.update(torch.tensor([0.0, 0.0]))
    assert average.result == pytest.approx(2.0)  # 12 / 6
    total = mt.SumOnline(torch.tensor(2.5))
    total.update([1, 2])
    assert total.result == 5.5
    averages = mt.OnlineAvgDict({"a": [1.0, 3.0]})
    averages.update({"a": 5.0, "b": 2.0})
    assert averages.get_dict_with_results() == {"a": 3.0, "b": 2.0} and len(averages) == 2
    averages["a"] = 10.0  # setting starts anew
    assert dict(averages) == {"a": 10.0, "b": 2.0}
    del averages["b"]
    assert list(averages) == ["a"]
    sums = mt.OnlineSumDict({"loss": 1.0})
    sums.update({"loss": [2.0, 3.0]})
    assert sums["loss"] == 6.0
