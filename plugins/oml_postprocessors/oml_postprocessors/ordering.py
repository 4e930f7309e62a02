"""How re-scored distances are merged back into a ranking: the two rules of OML's two APIs.

* :func:`rerank_top_n` (``PairwiseReranker``, OML's newer API): the ``top_n`` re-scored items of every query
  are re-ordered by their new scores and put first; the rest keep their order and their distances; the new
  scores are scaled down when needed so that the whole list stays sorted.
* :func:`update_top_n_in_matrix` (``PairwisePostprocessor``, the manual's distance-matrix API): the ``top_n``
  smallest entries of every row are replaced by the new scores, and every other entry of the row is shifted by
  one offset so that it stays above all of them.
"""

from __future__ import annotations

import torch
from torch import FloatTensor, LongTensor, Tensor

from oml_core.utils.indexing import assign_2d
from oml_core.utils.ragged import Ragged

#: Gap put between the re-scored items and the next distance, in units of the distance dtype's machine epsilon
#: (OML's ``10**3 * finfo(dtype).eps``: about ``1.2e-4`` for float32).
GAP_IN_EPS = 10**3

#: Margin between the largest new score and the smallest shifted distance in the distance-matrix API (OML's).
MATRIX_MARGIN = 1e-5


def gap_eps(dtype: torch.dtype) -> float:
    """The gap :func:`rerank_top_n` leaves below the first item it did not re-score: ``GAP_IN_EPS * eps``."""
    return GAP_IN_EPS * torch.finfo(dtype).eps


def _float_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype.is_floating_point else torch.float32


def rerank_top_n(
    distances: Ragged, retrieved_ids: Ragged, scores: Tensor, top_n: int
) -> tuple[Ragged, Ragged]:
    """Re-order the first ``top_n`` retrieved items of every query by new scores (OML's ``PairwiseReranker``).

    For a query with sorted distances ``d_1 <= ... <= d_L`` to the items ``r_1, ..., r_L``, let
    ``m = min(top_n, L)`` and ``s_1, ..., s_m`` the new scores of ``r_1, ..., r_m``. With ``pi`` the stable
    ascending argsort of ``s`` (equal scores keep the original order) and ``s_(k) = s_pi(k)``:

    * ids: ``r_pi(1), ..., r_pi(m), r_(m+1), ..., r_L``: the re-scored items by their new score, then the rest
      in their original order;
    * distances: ``t_1, ..., t_m, d_(m+1), ..., d_L``: the rest keep their distances, and

      - ``t_k = s_(k)`` when ``m = L`` or ``s_(m) <= d_(m+1)`` (the new scores already sort before the rest);
      - ``t_k = s_(k) * d_(m+1) / s_(m) - eps`` when ``s_(m) > d_(m+1) > 0``: OML's rule, a scale that brings
        the largest new score just below ``d_(m+1)``;
      - ``t_k = s_(k) - (s_(m) - d_(m+1)) - eps`` when ``s_(m) > d_(m+1)`` and ``d_(m+1) <= 0``: there a scale
        would reverse or collapse the order, so the scores are shifted down by the excess instead;

      with ``eps = GAP_IN_EPS * finfo(dtype).eps`` (:func:`gap_eps`), and finally ``t_k = min(t_k, d_(m+1))``,
      which only absorbs float rounding. The whole list is then in ascending order.

    Computed for all queries at once on ``[n_query, min(top_n, longest)]`` tensors; no loop over queries.

    Args:
        distances: Sorted distances of every query (as in ``RetrievalResults.distances``).
        retrieved_ids: The retrieved ids, of the same lengths.
        scores: The new scores of the first ``min(top_n, L_i)`` items of every query, flat, query after query.
        top_n: Number of leading items of every query that were re-scored (``>= 1``).

    Returns:
        New ``(distances, retrieved_ids)``; the inputs are not modified. The distances have the dtype of
        ``distances`` (float32 for integer distances).

    Raises:
        ValueError: ``scores`` has another length than the number of re-scored items, or non-finite values.
    """
    lengths = distances.lengths
    n_top = lengths.clamp(max=top_n)
    dtype = _float_dtype(distances.values.dtype)
    device = distances.values.device
    scores = scores.reshape(-1).to(device=device, dtype=dtype)
    if len(scores) != int(n_top.sum()):
        raise ValueError(f"got {len(scores)} scores for {int(n_top.sum())} re-scored items (top_n={top_n})")
    if not bool(torch.isfinite(scores).all()):
        raise ValueError(f"the pairwise model gave non-finite scores: {scores[~torch.isfinite(scores)][:5]}")

    top = Ragged(scores, n_top)
    sorted_scores, order = top.padded(fill=float("inf")).sort(dim=1, stable=True)
    top_ids = retrieved_ids.truncate(n_top).padded(fill=0).gather(1, order)
    sorted_scores = _fit_below_rest(
        sorted_scores, n_top, distances.values.to(dtype), distances.offsets, lengths
    )

    valid = top.valid_mask(sorted_scores.shape[1])
    in_top = _position_in_row(distances) < n_top.to(device)[distances.row_ids()]
    new_distances = distances.values.to(dtype, copy=True)
    new_distances[in_top] = sorted_scores[valid]
    new_ids = retrieved_ids.values.clone()
    new_ids[in_top] = top_ids[valid].to(new_ids.dtype)
    return Ragged(new_distances, lengths.clone()), Ragged(new_ids, lengths.clone())


def _position_in_row(ragged: Ragged) -> LongTensor:
    """``[len(values)]``: the position of every value within its row."""
    device = ragged.values.device
    return torch.arange(len(ragged.values), device=device) - ragged.offsets[:-1].to(device)[ragged.row_ids()]


def _fit_below_rest(
    sorted_scores: FloatTensor,
    n_top: LongTensor,
    values: FloatTensor,
    offsets: LongTensor,
    lengths: LongTensor,
) -> FloatTensor:
    """The padded sorted new scores ``[n_query, W]`` brought below the first item that was not re-scored, by
    the rule of :func:`rerank_top_n` (rows without such an item, or already below it, are left as they are)."""
    device = values.device
    n_top, offsets, lengths = n_top.to(device), offsets.to(device), lengths.to(device)
    rows = (lengths > n_top).nonzero().squeeze(1)
    nxt = values[offsets[rows] + n_top[rows]]
    last = sorted_scores[rows, n_top[rows] - 1]
    need = last > nxt
    rows, nxt, last = rows[need], nxt[need], last[need]
    if len(rows) == 0:
        return sorted_scores
    eps = gap_eps(sorted_scores.dtype)
    top = sorted_scores[rows]
    scaled = top * (nxt / last)[:, None] - eps
    shifted = top - (last - nxt)[:, None] - eps
    out = sorted_scores.clone()
    out[rows] = torch.minimum(torch.where((nxt > 0)[:, None], scaled, shifted), nxt[:, None])
    return out


def update_top_n_in_matrix(
    distances: FloatTensor, ii_top: LongTensor, new_top: FloatTensor, next_smallest: FloatTensor | None
) -> FloatTensor:
    """OML's distance-matrix rule: ``top_n`` entries of every row re-scored, the others shifted above them.

    With ``o_i = max_k new_top[i, k] - next_smallest[i] + MATRIX_MARGIN``, the output is
    ``out[i, j] = distances[i, j] + o_i`` for every column ``j`` not in ``ii_top[i]`` and
    ``out[i, ii_top[i, k]] = new_top[i, k]``: the other entries keep their relative order and the smallest of
    them is ``max_k new_top[i, k] + MATRIX_MARGIN``, above every new score (``o_i`` may be negative: the rest
    is then moved down towards the new scores). When the whole row was re-scored (``next_smallest`` is
    ``None``), only the assignment is made.

    Args:
        distances: ``[Q, G]`` distance matrix; not modified.
        ii_top: ``[Q, top_n]`` columns of the re-scored entries of every row (its ``top_n`` smallest).
        new_top: ``[Q, top_n]`` their new scores.
        next_smallest: ``[Q]`` the ``(top_n + 1)``-th smallest distance of every row, or ``None`` when
            ``top_n == G``.

    Returns:
        The updated ``[Q, G]`` matrix, a new tensor of the dtype and device of ``distances``.
    """
    new_top = new_top.to(distances)
    out = distances.clone()
    if next_smallest is not None:
        offset = new_top.max(dim=1).values - next_smallest.to(distances) + MATRIX_MARGIN
        out += offset[:, None]
    return assign_2d(out, ii_top, new_top)


__all__ = ["GAP_IN_EPS", "MATRIX_MARGIN", "gap_eps", "rerank_top_n", "update_top_n_in_matrix"]
