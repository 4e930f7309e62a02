"""ConstantThresholding and AdaptiveThresholding: hand-computed cases and a python-loop reference; thresholds
that would cut every item (NaN, -inf) refused wherever a threshold enters."""

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch import FloatTensor, LongTensor

from oml_core.functional.metric_adapters import map_at_k_tf
from oml_core.index.calibration import Calibration, calibrate_threshold
from oml_core.registry import default_registry
from oml_core.retrieval import RetrievalResults
from oml_core.retrieval.postprocessors import AdaptiveThresholding, ConstantThresholding


def _lists(rr):
    return [d.tolist() for d in rr.distances], [r.tolist() for r in rr.retrieved_ids]


def test_constant_thresholding_keeps_items_strictly_below_the_threshold():
    rr = RetrievalResults(
        distances=[
            FloatTensor([0.0, 0.05, 0.07, 0.1, 0.12, 0.2, 0.2, 0.4]),
            FloatTensor([]),
            FloatTensor([0.21, 0.25]),
        ],
        retrieved_ids=[LongTensor([0, 1, 2, 3, 4, 5, 6, 7]), LongTensor([]), LongTensor([1, 0])],
        gt_ids=[LongTensor([0, 7]), LongTensor([1]), LongTensor([0])],
        n_gallery=8,
    )
    out = ConstantThresholding(th=0.2).process(rr)
    _, ids = _lists(out)
    assert ids == [[0, 1, 2, 3, 4], [], []]
    assert [g.tolist() for g in out.gt_ids] == [[0, 7], [1], [0]]  # the ground truth is kept whole
    assert out.n_gallery.tolist() == [8, 8, 8]
    assert len(rr.retrieved_ids[0]) == 8  # the input is unchanged


def test_adaptive_thresholding_hand_computed():
    rr = RetrievalResults(
        distances=[
            FloatTensor([0.1, 0.2, 0.3, 0.9]),
            FloatTensor([0.0, 0.5]),
            FloatTensor([]),
            FloatTensor([0.4]),
        ],
        retrieved_ids=[LongTensor([5, 6, 7, 8]), LongTensor([1, 2]), LongTensor([]), LongTensor([3])],
    )
    # gaps: 0.1, 0.1, 0.6 | 0.5; their mean is 1.3 / 4 = 0.325
    assert _lists(AdaptiveThresholding(n_std=1.5).process(rr))[1] == [
        [5, 6, 7],
        [1],
        [],
        [3],
    ]  # big: > 0.4875
    assert _lists(AdaptiveThresholding(n_std=1.6).process(rr))[1] == [[5, 6, 7], [1, 2], [], [3]]  # > 0.52
    assert _lists(AdaptiveThresholding(n_std=2.0).process(rr))[1] == [[5, 6, 7, 8], [1, 2], [], [3]]  # > 0.65
    assert _lists(AdaptiveThresholding(n_std=0.0).process(rr))[1] == [[5], [1], [], [3]]  # any positive gap


def _random_rr(seed: int) -> RetrievalResults:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 9, (40,), generator=g).tolist()
    distances = [torch.sort(torch.rand(n, generator=g)).values for n in lengths]
    ids = [torch.randperm(20, generator=g)[:n] for n in lengths]
    return RetrievalResults(distances, ids)


@pytest.mark.parametrize("seed", range(5))
def test_thresholdings_match_python_loops(seed):
    rr = _random_rr(seed)
    th = 0.5
    expected = [
        [i for d, i in zip(ds.tolist(), rs.tolist()) if d < th]
        for ds, rs in zip(rr.distances, rr.retrieved_ids)
    ]
    assert _lists(ConstantThresholding(th).process(rr))[1] == expected

    gaps = [b - a for ds in rr.distances for a, b in zip(ds.tolist(), ds.tolist()[1:])]
    mean_gap = sum(gaps) / len(gaps)
    expected = []
    for ds, rs in zip(rr.distances, rr.retrieved_ids):
        d, keep = ds.tolist(), len(ds)
        for j in range(len(d) - 1):
            if d[j + 1] - d[j] > 1.2 * mean_gap:
                keep = j + 1
                break
        expected.append(rs.tolist()[:keep])
    assert _lists(AdaptiveThresholding(1.2).process(rr))[1] == expected


def test_thresholdings_are_registered_postprocessors():
    registry = default_registry()
    built = registry.build("postprocessor", {"name": "constant_thresholding", "args": {"th": 0.3}})
    assert isinstance(built, ConstantThresholding) and built.th == 0.3
    built = registry.build("postprocessor", {"name": "adaptive_thresholding", "args": {"n_std": 2}})
    assert isinstance(built, AdaptiveThresholding) and built.n_std == 2.0
    with pytest.raises(ValueError, match="n_std must be a non-negative"):
        AdaptiveThresholding(n_std=-1)


# ------------------------------------------------------------------------ thresholds that cut everything
@pytest.mark.parametrize(
    ("th", "shown"), [(float("nan"), "nan"), (np.float32("nan"), "nan"), (-math.inf, "-inf")]
)
def test_a_threshold_that_would_cut_every_item_is_refused(th, shown):
    # d < nan is false for every distance: every query would silently lose every item
    with pytest.raises(
        ValueError,
        match=rf"^th must be a number or \+inf \(a distance threshold\), got {shown}: it would cut every item$",
    ):
        ConstantThresholding(th=th)


@pytest.mark.parametrize("th", [True, "0.5", None, torch.tensor([0.1, 0.2])])
def test_a_threshold_that_is_not_a_number_is_refused(th):
    with pytest.raises(TypeError, match=r"^th must be a number \(a distance threshold\), got "):
        ConstantThresholding(th=th)


def test_numbers_and_plus_infinity_are_thresholds():
    assert [ConstantThresholding(th).th for th in (1, np.float64(0.25), torch.tensor(0.5))] == [
        1.0,
        0.25,
        0.5,
    ]
    rr = RetrievalResults([FloatTensor([0.1, 1e30])], [LongTensor([3, 4])])
    assert _lists(ConstantThresholding(math.inf).process(rr))[1] == [[3, 4]]  # keeps every item


def test_a_nan_threshold_from_a_config_is_refused():
    config = OmegaConf.create("name: constant_thresholding\nargs:\n  th: .nan\n")
    with pytest.raises(ValueError, match=r"^th must be a number or \+inf .* got nan"):
        default_registry().build("postprocessor", config)


def test_a_calibrations_threshold_must_be_finite():
    calibration = calibrate_threshold(
        torch.tensor([0.1, 0.3, 0.5]),
        torch.tensor([True, True, False]),
        torch.tensor([True, True, True]),
        target="f1",
    )
    assert Calibration.from_dict(calibration.to_dict()) == calibration
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(
            ValueError, match=rf"^a calibration's threshold must be a finite distance, got {bad}$"
        ):
            Calibration.from_dict({**calibration.to_dict(), "threshold": bad})


def test_a_nan_distance_threshold_of_tf_map_is_refused():
    matches, distances = torch.tensor([[True, False]]), torch.tensor([[0.1, 0.2]])
    with pytest.raises(ValueError, match=r"^distance_threshold must be a number or \+inf .* got nan"):
        map_at_k_tf(
            torch.tensor([0]), matches, r={0: 1}, k=2, distance_threshold=math.nan, lookup_distances=distances
        )
    assert (
        map_at_k_tf(
            torch.tensor([0]), matches, r={0: 1}, k=2, distance_threshold=0.15, lookup_distances=distances
        )
        == 1.0
    )
