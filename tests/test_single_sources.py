"""One source of truth per fact: the PCF/PCA computation, the input checks, the L2 distance, the logged messages."""

import logging
import math

import numpy as np
import pytest
import torch

import oml_core.utils.misc_torch as misc_torch
from oml_core.functional.metrics import calc_pcf
from oml_core.utils.checks import as_int_tensor, check_in_range, check_indices, check_int, check_top_k
from oml_core.utils.logs import PACKAGE_LOGGER, StdoutHandler, get_logger
from oml_core.utils.misc_torch import l2_dist_mm, pairwise_l2
from oml_core.utils.pca import PCA

# Four points of a 2 x 1 rectangle: the scatter matrix is diag(4, 1) (x: -1, 1, -1, 1; y: -.5, -.5, .5, .5), so
# the variances along the axes are 4 and 1 and the cumulative ratios 0.8 and 1.0. For r the number of axes is the
# largest p <= 2 with sum_{i < p} lambda_i / 5 <= r: p = 1 for r < 0.8 (0 <= r), p = 2 for r >= 0.8.
RECTANGLE = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0], [2.0, 1.0]])


def test_pcf_and_pca_agree_on_hand_computed_values() -> None:
    fractions = (0.0, 0.5, 0.79, 0.8, 1.0)
    assert PCA(RECTANGLE).calc_principal_axes_number(fractions).tolist() == [1, 1, 1, 2, 2]
    assert calc_pcf(RECTANGLE, fractions).tolist() == [0.5, 0.5, 0.5, 1.0, 1.0]


def test_no_variance_is_nan_for_the_metric_and_an_error_for_the_pca() -> None:
    same = torch.ones(3, 2)  # the ratio is 0 / 0
    assert all(math.isnan(v) for v in calc_pcf(same, (0.5, 1.0)).tolist())
    with pytest.raises(ValueError, match="no variance"):
        PCA(same).calc_principal_axes_number((0.5,))


@pytest.mark.parametrize("bad", [(True,), (), (1.5,), 0.5])
def test_both_pcf_entry_points_refuse_the_same_fractions(bad: object) -> None:
    with pytest.raises(ValueError, match="pcf_variance is expected to"):
        calc_pcf(RECTANGLE, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pcf_variance is expected to"):
        PCA(RECTANGLE).calc_principal_axes_number(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: check_int(True, "k"), "k must be a positive integer, got True"),
        (lambda: check_int(np.bool_(True), "k"), "k must be a positive integer, got "),
        (lambda: check_int(0, "top_n"), "top_n must be a positive integer, got 0"),
        (lambda: check_int(2.0, "k"), "k must be a positive integer, got 2.0"),
        (lambda: check_int(-1, "n", least=0), r"n must be an integer >= 0, got -1"),
        (
            lambda: check_int(False, "i", least=None, allow_none=True),
            "i must be an integer or None, got False",
        ),
        (
            lambda: check_top_k((1, True)),
            r"top_k must be a non-empty sequence of positive integers, got \(1, True\)",
        ),
        (
            lambda: check_in_range((0.5, True), "fmr_vals"),
            r"fmr_vals is expected to contain numbers in range",
        ),
        (lambda: as_int_tensor([True, False], "labels"), "labels must hold integers, got torch.bool"),
        (lambda: as_int_tensor([1, 2], "ids", n=3), r"ids must have one entry per item \(3\), got 2"),
        (lambda: check_indices([0, 3], "ids", 3), r"ids must be dataset indices within \[0, 2\]"),
    ],
)
def test_checks_refuse_bools_and_name_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_checks_accept_numpy_integers_and_give_python_values() -> None:
    assert check_int(np.int64(3), "k") == 3 and type(check_int(np.int64(3), "k")) is int
    assert check_int(None, "k", allow_none=True) is None
    assert check_top_k([np.int32(1), 5]) == (1, 5)
    assert check_in_range([0, 0.5, 1], "r") == (0, 0.5, 1)
    assert as_int_tensor(np.array([[1, 2]]), "x", flatten=True).tolist() == [1, 2]


def test_pairwise_l2_is_the_matrix_multiply_distance_refined_near_zero() -> None:
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [3.0, 4.0], [6.0, 8.0]])
    expected = torch.tensor([[0.0, 5, 5, 10], [5, 0, 0, 5], [5, 0, 0, 5], [10, 5, 5, 0]])
    assert torch.equal(pairwise_l2(x), expected)  # the duplicated rows exactly 0 apart
    assert torch.allclose(l2_dist_mm(x, x), expected, atol=1e-3)


def test_pairwise_l2_chunks_of_close_pairs_give_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(20, 6, generator=torch.Generator().manual_seed(2)).repeat(2, 1).requires_grad_(True)
    weights = torch.randn(40, 40, generator=torch.Generator().manual_seed(3))
    dist = pairwise_l2(x)
    grad = torch.autograd.grad((dist * weights).sum(), x)[0]
    monkeypatch.setattr(misc_torch, "PAIRS_CHUNK_VALUES", 13)  # 2 pairs per chunk
    chunked = pairwise_l2(x)
    assert torch.equal(chunked, dist)
    assert torch.allclose(torch.autograd.grad((chunked * weights).sum(), x)[0], grad, atol=1e-6)


def test_the_plugin_name_is_the_core_function() -> None:
    """``oml_losses.pairwise_l2`` is the core's function, also once the losses that use it are imported (a
    submodule of that name used to replace it with itself)."""
    oml_losses = pytest.importorskip("oml_losses")
    assert oml_losses.TripletLoss is not None  # imports oml_losses.triplet, which uses pairwise_l2
    assert oml_losses.pairwise_l2 is pairwise_l2


def test_library_messages_are_logged_to_the_current_stdout(capsys: pytest.CaptureFixture) -> None:
    package = logging.getLogger(PACKAGE_LOGGER)
    assert any(isinstance(h, StdoutHandler) for h in package.handlers) and not package.propagate
    get_logger("oml_core.some_module").info("a summary")
    get_logger("oml_core.some_module").debug("not shown")
    assert capsys.readouterr().out == "a summary\n"
    package.setLevel(logging.WARNING)  # what an application does to hide them
    try:
        get_logger("oml_core.some_module").info("hidden")
        assert capsys.readouterr().out == ""
    finally:
        package.setLevel(logging.INFO)
