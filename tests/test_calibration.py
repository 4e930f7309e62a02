"""The calibration of a match threshold (:mod:`oml_core.index.calibration`): the curve, the targets and the
threshold on hand-made distances (the values below are worked out by hand in the comments), ties, float32
thresholds, OML's FMR threshold, an independent naive implementation on random data, and the errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from oml_core.functional.fnmr import calc_fnmr_at_fmr
from oml_core.index.calibration import Calibration, CalibrationError, calibrate_rr, calibrate_threshold
from oml_core.retrieval import RetrievalResults
from oml_core.retrieval.postprocessors.thresholding import ConstantThresholding

INF = math.inf


def f32(x: float) -> float:
    """``x`` rounded to float32."""
    return float(torch.tensor(x, dtype=torch.float32))


def next_f32(x: float) -> float:
    """The next float32 above ``x`` (a float32 value)."""
    return float(torch.nextafter(torch.tensor(x, dtype=torch.float32), torch.tensor(INF)))


#: Six queries: their nearest distance d, whether the nearest is a true match m, whether they have one g.
#: q1 and q2 tie at 0.2 (a true and a false match); q4 has no true match in the gallery; q5 found nothing.
D = [0.1, 0.2, 0.2, 0.4, 0.5, INF]
M = [True, True, False, True, False, False]
G = [True, True, True, True, False, False]
#: Negative distances (retrieved items irrelevant to their query), for the FMR.
V = [0.2, 0.5, 0.6, 0.9]
#: The curve, by hand: 4 queries have a true match (recall's denominator). Distinct finite d: 0.1, 0.2, 0.4,
#: 0.5; threshold j admits d <= u_j.
#:   u=0.1: TP 1 of 1 admitted -> P 1,   R 1/4, F1 2*1*.25/1.25 = 0.4;        FMR: V < 0.15 -> 0/4
#:   u=0.2: TP 2 of 3 (the tie) -> P 2/3, R 2/4, F1 (2/3)/(7/6) = 4/7;         FMR: V < 0.3  -> 1/4
#:   u=0.4: TP 3 of 4 -> P 3/4, R 3/4, F1 3/4;                                  FMR: V < 0.45 -> 1/4
#:   u=0.5: TP 3 of 5 -> P 3/5, R 3/4, F1 2*.6*.75/1.35 = 2/3;                  FMR: V < 0.5+ -> 2/4
THRESHOLDS = [f32(0.15), f32(0.3), f32(0.45), next_f32(0.5)]
PRECISION = [1, 2 / 3, 3 / 4, 3 / 5]
RECALL = [1 / 4, 2 / 4, 3 / 4, 3 / 4]
F1 = [0.4, 4 / 7, 3 / 4, 2 / 3]
FMR = [0, 1 / 4, 1 / 4, 2 / 4]


def calibrate(target: str, value: float | None, negatives=V) -> Calibration:
    return calibrate_threshold(
        torch.tensor(D),
        torch.tensor(M),
        torch.tensor(G),
        None if negatives is None else torch.tensor(negatives),
        target=target,
        value=value,
    )


def test_the_curve_by_hand():
    curve = calibrate("f1", None).curve
    assert curve.thresholds == pytest.approx(THRESHOLDS, abs=0)
    assert curve.precision == pytest.approx(PRECISION)
    assert curve.recall == pytest.approx(RECALL)
    assert curve.f1 == pytest.approx(F1)
    assert curve.fmr == pytest.approx(FMR)


@pytest.mark.parametrize(
    "target, value, point",
    [
        ("precision", 0.7, 2),  # P >= 0.7 at u=0.1 (R 1/4) and u=0.4 (R 3/4): the higher recall
        ("precision", 0.75, 2),  # reached exactly
        ("precision", 0.8, 0),  # only u=0.1
        ("precision", 1.0, 0),
        ("precision", 0.6, 2),  # u=0.4 and u=0.5 both have R 3/4: the smaller threshold (fewer false matches)
        ("f1", None, 2),  # the highest F1, 3/4
    ],
)
def test_the_targets_pick_their_point(target, value, point):
    calibration = calibrate(target, value)
    assert calibration.threshold == THRESHOLDS[point]
    assert (calibration.precision, calibration.recall, calibration.f1, calibration.fmr) == pytest.approx(
        (PRECISION[point], RECALL[point], F1[point], FMR[point])
    )
    assert (calibration.target, calibration.value) == (target, value)
    assert (calibration.n_queries, calibration.n_with_match) == (6, 4)


@pytest.mark.parametrize(
    "fmr, quantile, admitted, precision, recall, achieved_fmr",
    [
        # numpy's linear quantile of V = [0.2, 0.5, 0.6, 0.9]: x = 3 * 0.25 = 0.75 between 0.2 and 0.5, gamma
        # 0.75 >= 0.5: 0.5 - 0.3 * 0.25 = 0.425; d < 0.425 admits q0..q3: TP 3 of 4
        (0.25, 0.425, 4, 3 / 4, 3 / 4, 1 / 4),
        (0.0, 0.2, 1, 1.0, 1 / 4, 0.0),  # the smallest negative: d < 0.2 admits q0 alone (the tie stays out)
        (1.0, 0.9, 5, 3 / 5, 3 / 4, 3 / 4),  # the largest: d < 0.9 admits all finite d; V < 0.9: 3 of 4
    ],
)
def test_the_fmr_target_is_omls_quantile(fmr, quantile, admitted, precision, recall, achieved_fmr):
    calibration = calibrate("fmr", fmr)
    assert calibration.threshold == pytest.approx(quantile, rel=1e-6)
    assert calibration.threshold == f32(calibration.threshold)  # a float32 value
    assert int((torch.tensor(D) < calibration.threshold).sum()) == admitted
    assert (calibration.precision, calibration.recall, calibration.fmr) == pytest.approx(
        (precision, recall, achieved_fmr)
    )


def test_the_fmr_threshold_gives_omls_fnmr_at_fmr_exactly():
    """OML's fnmr@fmr counts the positive distances >= its threshold; the calibrated threshold (rounded up to
    float32) counts the same ones, for every fmr, on random float32 distances with many ties."""
    generator = torch.Generator().manual_seed(0)
    positives = (torch.rand(300, generator=generator) * 50).round() / 50
    negatives = torch.rand(500, generator=generator) * 1.3 + 0.2
    fmr_vals = (0.0, 0.001, 0.01, 0.1, 0.33, 0.5, 0.9, 1.0)
    expected = calc_fnmr_at_fmr(positives, negatives, fmr_vals)
    for fmr, fnmr in zip(fmr_vals, expected.tolist()):
        threshold = calibrate_threshold(
            positives,
            torch.ones(300, dtype=torch.bool),
            torch.ones(300, dtype=torch.bool),
            negatives,
            "fmr",
            fmr,
        ).threshold
        assert float((positives >= threshold).double().mean()) == pytest.approx(fnmr, abs=1e-7)


def test_queries_at_equal_distances_are_answered_alike():
    # the three queries at 0.3 always go together: one curve point, TP 2 of 3
    calibration = calibrate_threshold(
        torch.tensor([0.3, 0.3, 0.3]),
        torch.tensor([True, False, True]),
        torch.ones(3, dtype=torch.bool),
        None,
        "f1",
    )
    assert calibration.curve.thresholds == (next_f32(0.3),)
    assert calibration.curve.precision == pytest.approx((2 / 3,))
    assert calibration.fmr is None and calibration.curve.fmr is None


def test_thresholds_are_float32_and_split_adjacent_float32_distances():
    low = 1.0
    high = next_f32(low)  # the next float32: no float32 strictly between them
    calibration = calibrate_threshold(
        torch.tensor([low, high]),
        torch.tensor([True, False]),
        torch.tensor([True, False]),
        None,
        "precision",
        1.0,
    )
    assert calibration.threshold == high  # admits 1.0 and not its neighbour, in float32 and in float64
    distances = torch.tensor([low, high], dtype=torch.float32)
    assert calibration.is_match(distances).tolist() == [True, False]
    assert [d < calibration.threshold for d in distances.tolist()] == [True, False]
    rr = RetrievalResults([distances], [torch.tensor([0, 1])])
    assert calibration.thresholding().process(rr).retrieved_ids[0].tolist() == [0]


def test_thresholding_is_constant_thresholding_at_the_threshold():
    calibration = calibrate("precision", 0.7)  # threshold f32(0.45)
    thresholding = calibration.thresholding()
    assert isinstance(thresholding, ConstantThresholding) and thresholding.th == calibration.threshold
    rr = RetrievalResults([torch.tensor([0.1, 0.4, 0.45, 0.5])], [torch.tensor([3, 1, 0, 2])])
    assert thresholding.process(rr).retrieved_ids[0].tolist() == [3, 1]


def test_calibrate_rr_takes_each_querys_nearest_item_and_omls_negatives():
    rr = RetrievalResults(
        distances=[torch.tensor([0.1, 0.3]), torch.tensor([0.2, 0.25]), torch.tensor([])],
        retrieved_ids=[torch.tensor([0, 1]), torch.tensor([2, 0]), torch.tensor([], dtype=torch.long)],
        gt_ids=[torch.tensor([0]), torch.tensor([0]), torch.tensor([], dtype=torch.long)],
    )
    # q0: nearest 0 relevant at 0.1; q1: nearest 2 irrelevant at 0.2 (its match 0 is second); q2: nothing.
    # Negatives: q0's item 1 at 0.3, q1's item 2 at 0.2.
    expected = calibrate_threshold(
        torch.tensor([0.1, 0.2, INF]),
        torch.tensor([True, False, False]),
        torch.tensor([True, True, False]),
        torch.tensor([0.3, 0.2]),
        "f1",
        None,
    )
    assert calibrate_rr(rr, "f1", None) == expected
    assert expected.threshold == f32(0.15) and expected.recall == 0.5 and expected.fmr == 0.0


def _naive_curve(d, m, g, v):
    """The curve from its definition, one threshold at a time, in Python floats."""
    finite = sorted({x for x in d if x != INF})
    rows = []
    for j, u in enumerate(finite):
        t = next_f32(u) if j == len(finite) - 1 else f32((u + finite[j + 1]) / 2)
        if t <= u:
            t = finite[j + 1]
        admitted = [i for i in range(len(d)) if d[i] < t]
        tp = sum(m[i] for i in admitted)
        precision, recall = tp / len(admitted), tp / sum(g)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        rows.append((t, precision, recall, f1, sum(x < t for x in v) / len(v)))
    return rows


@pytest.mark.parametrize("seed", range(5))
def test_the_curve_equals_a_naive_implementation(seed):
    rng = np.random.default_rng(seed)
    n = 40
    d = [f32(x) for x in np.round(rng.uniform(0, 1, n), 1)]  # few distinct values: many ties
    d[0] = INF
    g = rng.uniform(size=n) < 0.8
    m = g & (rng.uniform(size=n) < 0.6)
    v = [f32(x) for x in rng.uniform(0, 1.2, 30)]
    curve = calibrate_threshold(
        torch.tensor(d), torch.tensor(m), torch.tensor(g), torch.tensor(v), "precision", 0.01
    ).curve
    naive = _naive_curve(d, [bool(x) for x in m], [bool(x) for x in g], v)
    got = list(zip(curve.thresholds, curve.precision, curve.recall, curve.f1, curve.fmr))
    assert len(got) == len(naive)
    for row, expected in zip(got, naive):
        assert row[0] == expected[0]  # the same float32 threshold
        assert row[1:] == pytest.approx(expected[1:])


def test_an_unreachable_precision_is_an_error_with_the_best_there_is():
    with pytest.raises(
        CalibrationError, match=r"no threshold reaches precision 0\.9 .* highest precision is 0\.5000"
    ):
        calibrate_threshold(torch.tensor([0.1, 0.2]), torch.tensor([False, True]), torch.tensor([True, True]))


@pytest.mark.parametrize(
    "d, m, g, negatives, target, value, message",
    [
        ([0.1], [False], [False], None, "precision", 0.5, "0 have a true match"),
        ([], [], [], None, "f1", None, "cannot calibrate on 0 queries"),
        ([INF, INF], [False, False], [True, True], None, "f1", None, "no query retrieved any gallery item"),
        ([0.1, 0.2], [False, False], [True, True], None, "f1", None, "F1 is 0 at every threshold"),
        ([0.1], [True], [True], None, "fmr", 0.1, "needs negative distances"),
        ([0.1], [True], [True], [], "fmr", 0.1, "needs negative distances"),
    ],
)
def test_data_that_give_no_threshold(d, m, g, negatives, target, value, message):
    with pytest.raises(CalibrationError, match=message):
        calibrate_threshold(
            torch.tensor(d),
            torch.tensor(m, dtype=torch.bool),
            torch.tensor(g, dtype=torch.bool),
            None if negatives is None else torch.tensor(negatives),
            target,
            value,
        )


@pytest.mark.parametrize(
    "target, value, message",
    [
        ("recall", 0.9, "target must be one of"),
        ("precision", 0.0, r"needs a value in \(0, 1\]"),
        ("precision", 1.5, r"needs a value in \(0, 1\]"),
        ("fmr", -0.1, r"needs a value in \[0, 1\]"),
        ("f1", 0.5, "takes no value"),
    ],
)
def test_bad_targets(target, value, message):
    with pytest.raises(ValueError, match=message):
        calibrate(target, value)


def test_no_value_is_the_targets_default():
    assert calibrate("precision", None).value == 0.9
    assert calibrate("precision", None).threshold == THRESHOLDS[0]  # only u=0.1 reaches 0.9
    assert calibrate("fmr", None).value == 0.01


def test_a_true_match_without_a_match_or_different_lengths_are_refused():
    with pytest.raises(ValueError, match="must have has_match true"):
        calibrate_threshold(torch.tensor([0.1]), torch.tensor([True]), torch.tensor([False]))
    with pytest.raises(ValueError, match="one entry per query"):
        calibrate_threshold(torch.tensor([0.1, 0.2]), torch.tensor([True]), torch.tensor([True]))
    with pytest.raises(ValueError, match="NaN"):
        calibrate_threshold(torch.tensor([math.nan]), torch.tensor([False]), torch.tensor([True]))


def test_a_calibration_goes_through_json_unchanged():
    calibration = calibrate("precision", 0.7)
    assert Calibration.from_dict(json.loads(json.dumps(calibration.to_dict()))) == calibration
    assert "threshold 0.45 (precision 0.7): precision 0.7500, recall 0.7500" in calibration.summary()
