"""The two merge rules: ``rerank_top_n`` (re-ranker) and ``update_top_n_in_matrix`` (distance-matrix API)."""

from __future__ import annotations

import pytest
import torch
from oml_postprocessors import rerank_top_n, update_top_n_in_matrix
from oml_postprocessors.ordering import gap_eps

from oml_core.utils.ragged import Ragged

EPS32 = 1000 * torch.finfo(torch.float32).eps


def ragged(rows: list[list[float]], dtype: torch.dtype = torch.float32) -> Ragged:
    return Ragged.from_tensors([torch.tensor(row, dtype=dtype) for row in rows], dtype)


def test_gap_eps_is_oml_thousand_machine_epsilons() -> None:
    assert gap_eps(torch.float32) == pytest.approx(1.1920929e-4)
    assert gap_eps(torch.float64) == pytest.approx(2.220446049250313e-13)


def test_oml_example_1_permutes_the_top_without_scaling() -> None:
    distances = ragged([[0.1, 0.2, 0.5, 0.6, 0.7]])
    ids = ragged([[3, 2, 1, 0, 4]], torch.long)
    new_d, new_ids = rerank_top_n(distances, ids, torch.tensor([0.4, 0.2, 0.3]), top_n=3)
    assert new_ids[0].tolist() == [2, 1, 3, 0, 4]
    assert torch.allclose(new_d[0], torch.tensor([0.2, 0.3, 0.4, 0.6, 0.7]))


def test_oml_example_2_scales_the_top_below_the_next_distance() -> None:
    distances = ragged([[0.1, 0.2, 0.3, 0.5, 0.6]])
    ids = ragged([[0, 1, 2, 3, 4]], torch.long)
    new_d, new_ids = rerank_top_n(distances, ids, torch.tensor([1.0, 2.0, 5.0]), top_n=3)
    assert new_ids[0].tolist() == [0, 1, 2, 3, 4]
    # scale 0.5 / 5 = 0.1, then minus eps
    expected = torch.tensor([0.1 - EPS32, 0.2 - EPS32, 0.5 - EPS32, 0.5, 0.6])
    assert torch.allclose(new_d[0], expected, atol=1e-7, rtol=0)
    assert new_d[0][2] < new_d[0][3]


def test_a_non_positive_next_distance_shifts_instead_of_scaling() -> None:
    distances = ragged([[-0.5, -0.4, -0.3]])
    ids = ragged([[7, 8, 9]], torch.long)
    new_d, new_ids = rerank_top_n(distances, ids, torch.tensor([0.2, 0.1]), top_n=2)
    assert new_ids[0].tolist() == [8, 7, 9]
    # shifted down by last - next = 0.2 - (-0.3) = 0.5, and eps
    assert torch.allclose(new_d[0], torch.tensor([-0.4 - EPS32, -0.3 - EPS32, -0.3]), atol=1e-7, rtol=0)


def test_equal_scores_keep_the_previous_order_and_rows_of_all_lengths() -> None:
    distances = ragged([[0.1, 0.2, 0.3, 0.9], [], [0.4], [0.1, 0.2]])
    ids = ragged([[5, 6, 7, 8], [], [3], [1, 0]], torch.long)
    scores = torch.tensor([0.5, 0.5, 0.1, 0.7, 0.3, 0.3])  # top_n=3: 3 + 0 + 1 + 2 scores
    new_d, new_ids = rerank_top_n(distances, ids, scores, top_n=3)
    assert [row.tolist() for row in new_ids] == [[7, 5, 6, 8], [], [3], [1, 0]]
    assert torch.allclose(new_d.values, torch.tensor([0.1, 0.5, 0.5, 0.9, 0.7, 0.3, 0.3]))
    assert new_d.lengths.tolist() == [4, 0, 1, 2]


def test_float64_distances_keep_their_dtype_and_eps() -> None:
    distances = ragged([[0.0, 1.0, 2.0]], torch.float64)
    ids = ragged([[0, 1, 2]], torch.long)
    new_d, _ = rerank_top_n(distances, ids, torch.tensor([4.0, 3.0]), top_n=2)
    assert new_d.values.dtype == torch.float64
    eps = 1000 * torch.finfo(torch.float64).eps
    assert new_d[0].tolist() == pytest.approx([3.0 * 2 / 4 - eps, 2.0 - eps, 2.0], abs=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_matches_the_naive_rule_on_random_ragged_results(seed: int, naive) -> None:
    generator = torch.Generator().manual_seed(seed)
    top_n = int(torch.randint(2, 6, (1,), generator=generator))
    lengths = torch.randint(0, 9, (40,), generator=generator).tolist()
    shift = float(torch.randn(1, generator=generator))  # some queries get negative distances
    rows_d = [(torch.rand(n, generator=generator) * 2 + shift).sort().values for n in lengths]
    rows_ids = [torch.randperm(20, generator=generator)[:n] for n in lengths]
    scores_rows = [torch.randn(min(n, top_n), generator=generator) * 3 for n in lengths]
    new_d, new_ids = rerank_top_n(
        Ragged.from_tensors(rows_d), Ragged.from_tensors(rows_ids, torch.long), torch.cat(scores_rows), top_n
    )
    for i, (d, ids, s) in enumerate(zip(rows_d, rows_ids, scores_rows)):
        exp_d, exp_ids = naive(d.tolist(), ids.tolist(), s.tolist(), top_n, EPS32)
        assert new_ids[i].tolist() == exp_ids
        assert new_d[i].tolist() == pytest.approx(exp_d, abs=1e-5)
        assert bool((new_d[i][1:] >= new_d[i][:-1]).all())  # still sorted
        assert torch.equal(new_d[i][top_n:], d[top_n:])  # the rest keeps its distances exactly


def test_inputs_are_not_modified() -> None:
    distances = ragged([[0.1, 0.2, 0.3]])
    ids = ragged([[0, 1, 2]], torch.long)
    rerank_top_n(distances, ids, torch.tensor([9.0, 8.0]), top_n=2)
    assert distances[0].tolist() == pytest.approx([0.1, 0.2, 0.3]) and ids[0].tolist() == [0, 1, 2]


def test_bad_scores_are_refused() -> None:
    distances, ids = ragged([[0.1, 0.2, 0.3]]), ragged([[0, 1, 2]], torch.long)
    with pytest.raises(ValueError, match="got 3 scores for 2 re-scored items"):
        rerank_top_n(distances, ids, torch.tensor([1.0, 2.0, 3.0]), top_n=2)
    with pytest.raises(ValueError, match="non-finite scores"):
        rerank_top_n(distances, ids, torch.tensor([1.0, float("nan")]), top_n=2)


def test_matrix_rule_shifts_the_rest_above_the_new_scores() -> None:
    distances = torch.tensor([[0.3, 0.1, 0.4, 0.2], [0.5, 0.6, 0.7, 0.8]])
    ii_top = torch.tensor([[1, 3], [0, 1]])
    new_top = torch.tensor([[2.0, 4.0], [0.1, 0.2]])
    out = update_top_n_in_matrix(distances, ii_top, new_top, next_smallest=torch.tensor([0.3, 0.7]))
    # row 0: offset 4 - 0.3 + 1e-5; row 1: offset 0.2 - 0.7 + 1e-5 (negative: the rest moves down)
    expected = torch.tensor([[4.00001, 2.0, 4.10001, 4.0], [0.1, 0.2, 0.20001, 0.30001]])
    assert torch.allclose(out, expected, atol=1e-6, rtol=0)
    assert distances[0, 1] == pytest.approx(0.1)  # the input is not modified


def test_matrix_rule_without_rest_only_assigns() -> None:
    out = update_top_n_in_matrix(
        torch.tensor([[0.2, 0.1]]), torch.tensor([[1, 0]]), torch.tensor([[5.0, 6.0]]), next_smallest=None
    )
    assert out.tolist() == [[6.0, 5.0]]
