"""Calibration of a distance threshold for "match" / "no match" answers (TF Similarity's ``calibrate``, in
oml's terms): the functional core, pure tensor code.

The data are the queries of a labelled validation split, searched against its gallery with oml's exclusion
rules (a query never retrieves itself nor an item of its sequence). For query ``q``:

- ``d_q``: the distance to its nearest retrieved gallery item (``inf`` when nothing could be retrieved);
- ``m_q``: whether that item is relevant (has the query's label): a *true match*;
- ``g_q``: whether the query has any relevant gallery item at all.

A threshold ``t`` answers "match" for query ``q`` iff ``d_q < t`` (strictly: the strictness of
:class:`~oml_core.retrieval.postprocessors.thresholding.ConstantThresholding`, which keeps the items with
distance ``< th``). Then

.. code-block:: text

    TP(t) = #{q : d_q < t and m_q}             FP(t) = #{q : d_q < t and not m_q}
    precision(t) = TP(t) / (TP(t) + FP(t))     (1 when no query is answered "match")
    recall(t)    = TP(t) / #{q : g_q}          (the queries that have a true match in the gallery)
    F1(t)        = 2 precision(t) recall(t) / (precision(t) + recall(t))      (0 when both are 0)
    FMR(t)       = #{v in V : v < t} / |V|

where ``V`` are OML's negative distances of :func:`~oml_core.functional.fnmr.calc_fnmr_at_fmr_rr`: the
distances of every retrieved item (of the top ``n`` searched) that is not relevant to its query. With ``n`` at
least the gallery size this is the False Match Rate over all query-gallery pairs.

Distances are taken in float32, as the kNN backends return them, and every threshold is a float32 value, so
that ``d < t`` answers the same in float32 (``ConstantThresholding``, torch) as in float64 (Python).

**The curve.** With ``u_1 < ... < u_m`` the distinct finite ``d_q``, point ``j`` of the curve answers "match"
for exactly the queries with ``d_q <= u_j`` (queries at equal distances are always answered alike): its
threshold ``t_j`` is the float32 nearest to the midpoint ``(u_j + u_{j+1}) / 2`` (``u_{j+1}`` when that
rounds down to ``u_j``), and ``t_m`` is the next float32 above ``u_m``.

**The targets** (:data:`TARGETS`; a value of None is the target's default, :data:`DEFAULT_VALUES`):

- ``precision`` (``value`` in ``(0, 1]``): of the curve points with ``precision >= value``, the one with the
  highest recall; of several, the smallest threshold (the fewest false matches). None reaches it: a
  :class:`CalibrationError` that gives the highest precision there is.
- ``f1`` (no ``value``): the curve point of the highest F1; of several, the smallest threshold.
- ``fmr`` (``value`` in ``[0, 1]``): OML's threshold of ``fnmr@fmr``, the linear quantile of ``V`` at
  ``value`` (:func:`~oml_core.functional.fnmr.quantile_ranks`, :func:`~oml_core.functional.fnmr.lerp_quantile`),
  rounded up to float32 (:func:`~oml_core.functional.fnmr.round_up_to_dtype`, which answers every float32
  ``d < t`` as the float64 quantile does). No negative distance: a :class:`CalibrationError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from oml_core.functional.fnmr import lerp_quantile, quantile_ranks, round_up_to_dtype
from oml_core.functional.metrics import calc_gt_tops

if TYPE_CHECKING:
    from oml_core.retrieval.postprocessors.thresholding import ConstantThresholding
    from oml_core.retrieval.retrieval_results import RetrievalResults

#: The targets a threshold can be calibrated for (see the module's docstring).
TARGETS = ("precision", "f1", "fmr")
#: The value of a target given none: a precision of 0.9, an FMR of 0.01 (f1 takes no value).
DEFAULT_VALUES: dict[str, float | None] = {"precision": 0.9, "f1": None, "fmr": 0.01}


class CalibrationError(ValueError):
    """The calibration data cannot give a threshold for the target (it is unreachable, or the data lack the
    queries or distances it needs); the message says why."""


@dataclass(frozen=True)
class CalibrationCurve:
    """The curve of a calibration, one entry per distinct finite nearest distance (see the module's docstring):
    the thresholds (ascending) and precision, recall, F1 and FMR at each (``fmr`` is None without negative
    distances)."""

    thresholds: tuple[float, ...]
    precision: tuple[float, ...]
    recall: tuple[float, ...]
    f1: tuple[float, ...]
    fmr: tuple[float, ...] | None


@dataclass(frozen=True)
class Calibration:
    """A calibrated distance threshold: "match" iff the nearest gallery item is at a distance ``< threshold``.

    Attributes:
        threshold: The threshold (a float32 value).
        target: The target it was chosen for, one of :data:`TARGETS`.
        value: The target's value (None for ``f1``).
        precision: The precision achieved at ``threshold`` on the calibration data.
        recall: The recall achieved there.
        f1: The F1 achieved there.
        fmr: The false match rate there (None without negative distances).
        n_queries: The number of calibration queries.
        n_with_match: How many of them have a true match in their gallery (recall's denominator).
        curve: The whole curve.
    """

    threshold: float
    target: str
    value: float | None
    precision: float
    recall: float
    f1: float
    fmr: float | None
    n_queries: int
    n_with_match: int
    curve: CalibrationCurve

    def __post_init__(self) -> None:
        if not math.isfinite(self.threshold):  # NaN or -inf: no match ever; +inf: always
            raise ValueError(f"a calibration's threshold must be a finite distance, got {self.threshold}")

    def thresholding(self) -> ConstantThresholding:
        """The post-processor that keeps the retrieved items closer than :attr:`threshold`."""
        from oml_core.retrieval.postprocessors.thresholding import ConstantThresholding

        return ConstantThresholding(th=self.threshold)

    def is_match(self, distances: Tensor) -> Tensor:
        """``distances < threshold``, compared in float32 (a bool tensor of the shape of ``distances``)."""
        return torch.as_tensor(distances).float() < self.threshold

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (the curve's tuples as lists); :meth:`from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        """The calibration of :meth:`to_dict`.

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not such a dict.
        """
        curve = data["curve"]
        if data["target"] not in TARGETS:
            raise ValueError(f"unknown calibration target {data['target']!r}")
        return cls(
            threshold=float(data["threshold"]),
            target=data["target"],
            value=_optional(float, data["value"]),
            precision=float(data["precision"]),
            recall=float(data["recall"]),
            f1=float(data["f1"]),
            fmr=_optional(float, data["fmr"]),
            n_queries=int(data["n_queries"]),
            n_with_match=int(data["n_with_match"]),
            curve=CalibrationCurve(
                thresholds=tuple(map(float, curve["thresholds"])),
                precision=tuple(map(float, curve["precision"])),
                recall=tuple(map(float, curve["recall"])),
                f1=tuple(map(float, curve["f1"])),
                fmr=_optional(lambda values: tuple(map(float, values)), curve["fmr"]),
            ),
        )

    def summary(self) -> str:
        """One line: the threshold, the target and what it achieves."""
        goal = "max F1" if self.target == "f1" else f"{self.target} {self.value:g}"
        fmr = "" if self.fmr is None else f", FMR {self.fmr:.4f}"
        return (
            f"threshold {self.threshold:.6g} ({goal}): precision {self.precision:.4f}, recall {self.recall:.4f}, "
            f"F1 {self.f1:.4f}{fmr} on {self.n_queries} queries"
        )


def calibrate_threshold(
    nearest_distances: Tensor,
    nearest_is_match: Tensor,
    has_match: Tensor,
    negative_distances: Tensor | None = None,
    target: str = "precision",
    value: float | None = None,
) -> Calibration:
    """The threshold of ``target`` (see the module's docstring for the formulas and the rules).

    Args:
        nearest_distances: ``[Q]`` ``d_q``, the distance to each query's nearest retrieved item (``inf``: none).
        nearest_is_match: ``[Q]`` ``m_q``, whether that item is relevant.
        has_match: ``[Q]`` ``g_q``, whether the query has a relevant gallery item.
        negative_distances: ``V``, the distances of the retrieved irrelevant items (FMR; needed by ``fmr``).
        target: One of :data:`TARGETS`.
        value: The target's value: a precision in ``(0, 1]``, an FMR in ``[0, 1]``; None: the target's default
            (:data:`DEFAULT_VALUES`); ``f1`` takes none.

    Returns:
        The :class:`Calibration`.

    Raises:
        ValueError: an unknown target, a value out of range, inputs of different lengths or a NaN distance.
        CalibrationError: no query, no query with a true match, no finite distance, an unreachable precision,
            no true match at all (``f1``) or no negative distance (``fmr``).
    """
    value = check_target(target, value)
    d, m, g = _check_inputs(nearest_distances, nearest_is_match, has_match)
    negatives = None if negative_distances is None else _float32(negative_distances, "negative_distances")
    n_with_match = int(g.sum())
    if len(d) == 0 or n_with_match == 0:
        raise CalibrationError(
            f"cannot calibrate on {len(d)} queries of which {n_with_match} have a true match in the gallery"
        )
    curve = _curve(d, m, n_with_match, negatives)
    if target == "fmr":
        assert value is not None  # check_target gives fmr a value (its default when None)
        threshold = _fmr_threshold(negatives, value)
        precision, recall, f1, fmr = _point(d, m, n_with_match, negatives, threshold)
    else:
        j = _chosen(curve, target, value)
        threshold, precision, recall, f1 = (
            curve.thresholds[j],
            curve.precision[j],
            curve.recall[j],
            curve.f1[j],
        )
        fmr = None if curve.fmr is None else curve.fmr[j]
    return Calibration(
        threshold=threshold,
        target=target,
        value=value,
        precision=precision,
        recall=recall,
        f1=f1,
        fmr=fmr,
        n_queries=len(d),
        n_with_match=n_with_match,
        curve=curve,
    )


def calibrate_rr(rr: RetrievalResults, target: str = "precision", value: float | None = None) -> Calibration:
    """:func:`calibrate_threshold` of retrieval results with ground truth: ``d_q`` and ``m_q`` from each query's
    first retrieved item, ``g_q`` from its ``gt_ids``, ``V`` the distances of all its retrieved items that are not
    in its ``gt_ids`` (as :func:`~oml_core.functional.fnmr.calc_fnmr_at_fmr_rr` takes them).

    Raises:
        ValueError: ``rr`` has no ground truth; see :func:`calc_gt_tops` and :func:`calibrate_threshold`.
        CalibrationError: see :func:`calibrate_threshold`.
    """
    if rr.gt_ids is None:
        raise ValueError("calibration needs retrieval results with ground truth (rr.gt_ids is None)")
    distances = rr.distances.values
    is_relevant = calc_gt_tops(rr.retrieved_ids, rr.gt_ids).values.bool()
    found = rr.distances.lengths > 0
    firsts = rr.distances.offsets[:-1][found]  # each query's nearest item, in the flat values
    nearest = torch.full((len(rr),), math.inf)
    nearest[found] = distances[firsts].float()
    nearest_is_match = torch.zeros(len(rr), dtype=torch.bool)
    nearest_is_match[found] = is_relevant[firsts]
    has_match = rr.gt_ids.lengths > 0
    return calibrate_threshold(
        nearest, nearest_is_match, has_match, distances[~is_relevant], target=target, value=value
    )


# --------------------------------------------------------------------------------------------- helpers
def _optional(convert: Callable[[Any], Any], value: Any) -> Any:
    return None if value is None else convert(value)


def check_target(target: str, value: float | None) -> float | None:
    """The value of ``target`` (``value``, or the target's default when None).

    Raises:
        ValueError: an unknown target, a value out of its range, or a value for ``f1``.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {list(TARGETS)}, got {target!r}")
    if value is None or target == "f1":
        if value is not None:
            raise ValueError(f"the target f1 (the highest F1) takes no value, got {value!r}")
        return DEFAULT_VALUES[target]
    low_open = target == "precision"
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and (0 < value <= 1 if low_open else 0 <= value <= 1)
    )
    if not ok:
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(f"the target {target} needs a value in {interval}, got {value!r}")
    return float(value)


def _float32(values: Tensor, name: str) -> Tensor:
    flat = torch.as_tensor(values).detach().reshape(-1).cpu().float()
    if bool(torch.isnan(flat).any()):
        raise ValueError(f"{name} contains NaN")
    return flat


def _check_inputs(distances: Tensor, is_match: Tensor, has_match: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    d = _float32(distances, "nearest_distances")
    m = torch.as_tensor(is_match).reshape(-1).cpu().bool()
    g = torch.as_tensor(has_match).reshape(-1).cpu().bool()
    if not len(d) == len(m) == len(g):
        raise ValueError(
            f"nearest_distances, nearest_is_match and has_match must have one entry per query, got "
            f"{len(d)}, {len(m)} and {len(g)}"
        )
    if bool((m & ~g).any()):
        raise ValueError("a query whose nearest item is a true match must have has_match true")
    return d, m, g


def _curve(d: Tensor, m: Tensor, n_with_match: int, negatives: Tensor | None) -> CalibrationCurve:
    finite = torch.isfinite(d)
    if not bool(finite.any()):
        raise CalibrationError("no query retrieved any gallery item: there is no distance to calibrate on")
    order = torch.sort(d[finite], stable=True)
    ds, ms = order.values, m[finite][order.indices]
    last = torch.ones(len(ds), dtype=torch.bool)  # the last query of every distinct distance
    last[:-1] = ds[1:] != ds[:-1]
    u = ds[last]
    tp = torch.cumsum(ms.long(), 0)[last].double()
    admitted = (torch.nonzero(last).reshape(-1) + 1).double()
    precision = tp / admitted
    recall = tp / n_with_match
    f1 = _f1(precision, recall)
    thresholds = _thresholds(u)
    fmr = None
    if negatives is not None and len(negatives):
        below = torch.searchsorted(torch.sort(negatives).values, thresholds, side="left")
        fmr = tuple((below.double() / len(negatives)).tolist())
    return CalibrationCurve(
        thresholds=tuple(thresholds.double().tolist()),
        precision=tuple(precision.tolist()),
        recall=tuple(recall.tolist()),
        f1=tuple(f1.tolist()),
        fmr=fmr,
    )


def _f1(precision: Tensor, recall: Tensor) -> Tensor:
    total = precision + recall
    return torch.where(total > 0, 2 * precision * recall / total.clamp(min=1e-300), torch.zeros_like(total))


def _thresholds(u: Tensor) -> Tensor:
    """``[m]`` float32 thresholds of the distinct float32 distances ``u`` (ascending): ``t_j`` in
    ``(u_j, u_{j+1}]``, the float32 nearest to their midpoint; ``t_m`` the next float32 above ``u_m``."""
    upper = torch.nextafter(u[-1:], torch.tensor([math.inf], dtype=torch.float32))
    if len(u) == 1:
        return upper
    lo, hi = u[:-1], u[1:]
    mid = ((lo.double() + hi.double()) / 2).float()
    mid = torch.where(mid > lo, mid, hi)
    return torch.cat([mid, upper])


def _chosen(curve: CalibrationCurve, target: str, value: float | None) -> int:
    """The curve point of ``precision`` or ``f1`` (see the module's docstring)."""
    precision, recall, f1 = (
        torch.tensor(x, dtype=torch.float64) for x in (curve.precision, curve.recall, curve.f1)
    )
    if target == "f1":
        if float(f1.max()) == 0:
            raise CalibrationError(
                "no query's nearest gallery item is a true match: F1 is 0 at every threshold"
            )
        return int(torch.nonzero(f1 == f1.max())[0, 0])
    assert value is not None  # check_target gives precision a value (its default when None)
    reaching = precision >= value
    if not bool(reaching.any()):
        best = int(torch.argmax(precision))
        raise CalibrationError(
            f"no threshold reaches precision {value:g} on {len(curve.thresholds)} distinct distances: the "
            f"highest precision is {curve.precision[best]:.4f} (threshold {curve.thresholds[best]:.6g}, recall "
            f"{curve.recall[best]:.4f}); lower the target or calibrate on other data"
        )
    best_recall = recall[reaching].max()
    return int(torch.nonzero(reaching & (recall == best_recall))[0, 0])


def _fmr_threshold(negatives: Tensor | None, fmr: float) -> float:
    """OML's threshold of ``fnmr@fmr`` at ``fmr``, rounded up to float32."""
    if negatives is None or len(negatives) == 0:
        raise CalibrationError(
            "the target fmr needs negative distances (retrieved items irrelevant to their query); there are none"
        )
    lo, hi, gamma = quantile_ranks(len(negatives), [fmr])
    ordered = torch.sort(negatives).values
    quantile = lerp_quantile(ordered[lo], ordered[hi], gamma)
    return float(round_up_to_dtype(quantile, torch.float32)[0])


def _point(
    d: Tensor, m: Tensor, n_with_match: int, negatives: Tensor | None, threshold: float
) -> tuple[float, float, float, float | None]:
    """``(precision, recall, F1, FMR)`` at ``threshold``."""
    admitted = d < threshold
    tp, n_admitted = int((admitted & m).sum()), int(admitted.sum())
    precision = tp / n_admitted if n_admitted else 1.0
    recall = tp / n_with_match
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    fmr = (
        None
        if negatives is None or not len(negatives)
        else int((negatives < threshold).sum()) / len(negatives)
    )
    return precision, recall, f1, fmr


__all__ = [
    "DEFAULT_VALUES",
    "TARGETS",
    "Calibration",
    "CalibrationCurve",
    "CalibrationError",
    "calibrate_rr",
    "calibrate_threshold",
    "check_target",
]
