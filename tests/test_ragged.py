"""``Ragged``: flat storage of 1-D tensors of different lengths, checked against plain Python lists."""

from __future__ import annotations

import pytest
import torch

from oml_core.utils.ragged import Ragged

ROWS = [[4, 0, 2], [], [7], [1, 1, 5, 9]]


def make() -> Ragged:
    return Ragged(torch.tensor([4, 0, 2, 7, 1, 1, 5, 9]), [3, 0, 1, 4])


def test_rows_slices_and_iteration_match_the_lists() -> None:
    ragged = make()
    assert len(ragged) == 4
    assert [row.tolist() for row in ragged] == ROWS
    assert [ragged[i].tolist() for i in range(4)] == ROWS
    assert ragged[-1].tolist() == [1, 1, 5, 9]
    assert ragged[torch.tensor(2)].tolist() == [7]  # integer tensors index like ints
    assert [row.tolist() for row in ragged[1:3]] == ROWS[1:3]
    assert [row.tolist() for row in ragged[::2]] == ROWS[::2]
    assert len(ragged[3:1]) == 0
    assert ragged.offsets.tolist() == [0, 3, 3, 4, 8]
    with pytest.raises(IndexError, match="row 4 out of range for 4 rows"):
        ragged[4]


def test_row_views_share_the_flat_values() -> None:
    ragged = make()
    assert ragged[3].data_ptr() == ragged.values[4:].data_ptr()
    assert ragged[1:3].values.data_ptr() == ragged.values[3:].data_ptr()


def test_from_tensors_round_trip_and_dtype() -> None:
    ragged = Ragged.from_tensors([torch.tensor(r) for r in ROWS], torch.long)
    assert ragged.values.tolist() == [4, 0, 2, 7, 1, 1, 5, 9] and ragged.lengths.tolist() == [3, 0, 1, 4]
    assert Ragged.from_tensors(ragged) is ragged
    as_float = Ragged.from_tensors(ragged, torch.float64)
    assert as_float.values.dtype == torch.float64 and as_float.lengths.tolist() == [3, 0, 1, 4]
    assert len(Ragged.from_tensors([])) == 0
    with pytest.raises(ValueError, match=r"element 1 must be a 1-D tensor, got shape \(1, 2\)"):
        Ragged.from_tensors([torch.zeros(2), torch.zeros(1, 2)])


def test_padded_row_ids_and_valid_mask() -> None:
    ragged = make()
    assert ragged.padded(fill=-1).tolist() == [[4, 0, 2, -1], [-1] * 4, [7, -1, -1, -1], [1, 1, 5, 9]]
    assert ragged.padded(max_len=2, fill=-1).tolist() == [[4, 0], [-1, -1], [7, -1], [1, 1]]
    assert ragged.padded(max_len=0).shape == (4, 0)
    assert Ragged.empty(3).padded().shape == (3, 0)
    assert ragged.row_ids().tolist() == [0, 0, 0, 2, 3, 3, 3, 3]
    assert ragged.valid_mask(2).tolist() == [[True, True], [False, False], [True, False], [True, True]]


def test_truncate() -> None:
    ragged = make()
    cut = ragged.truncate([2, 5, 0, 3])
    assert [row.tolist() for row in cut] == [[4, 0], [], [], [1, 1, 5]]
    assert ragged.truncate([3, 0, 1, 4]) is ragged  # nothing to cut
    with pytest.raises(ValueError, match=r"n_keep must have one entry per row \(4\), got 3"):
        ragged.truncate([1, 1, 1])
    with pytest.raises(ValueError, match="n_keep must be non-negative, got -1"):
        ragged.truncate([1, -1, 1, 1])


def test_invalid_construction() -> None:
    with pytest.raises(ValueError, match="lengths sum to 3 but there are 2 values"):
        Ragged(torch.zeros(2), [1, 2])
    with pytest.raises(ValueError, match="lengths must be non-negative"):
        Ragged(torch.zeros(2), [3, -1])
    with pytest.raises(ValueError, match="lengths must be a 1-D sequence of integers"):
        Ragged(torch.zeros(2), torch.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match=r"values must be 1-D, got shape \(1, 2\)"):
        Ragged(torch.zeros(1, 2), [2])


def test_clone_and_repr() -> None:
    ragged = make()
    copy = ragged.clone()
    copy.values[0] = 100
    assert ragged[0].tolist() == [4, 0, 2]
    assert repr(Ragged(torch.tensor([1, 2]), [1, 1])) == "Ragged([tensor([1]), tensor([2])])"
    assert repr(make()).endswith("... (4 rows)])")
