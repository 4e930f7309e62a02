"""The answer of a search, defined once: what ``oml search`` prints (as JSON or a table), what the service's
``POST /search`` returns (``oml serve``) and what Python code gets from :func:`search_answer`.

Its data (:meth:`SearchAnswer.as_data`, the JSON of ``oml search --format json``) is ``{"index", "threshold",
"calibration_stale", "queries": [{"query", "match", "results": [hit, ...]}]}``:

- ``index``: the index's folder (a string), ``threshold``: its calibrated match threshold (None: not calibrated),
  ``calibration_stale``: whether the gallery changed since the threshold was calibrated
  (:attr:`GalleryIndex.calibration_stale <oml_core.index.gallery.GalleryIndex.calibration_stale>`; ``oml index
  calibrate INDEX`` calibrates it again);
- per query, in the order given: ``query``, its name (an image's path, a text ...); ``match``, its nearest item's
  match (None when the index is not calibrated, false when nothing was found); ``results``, the
  :class:`~oml_core.index.gallery.SearchHit` s nearest first, each ``{rank, id, path, label, distance, match}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oml_core.reports.answer import Answer
from oml_core.utils.text import printable

if TYPE_CHECKING:  # the hits' class, for annotations: the answers import no torch
    from oml_core.index.gallery import SearchHit


@dataclass(frozen=True)
class QueryAnswer:
    """The answer to one query: its name, its verdict (``match``; None: the index is not calibrated) and its hits
    as dicts (:meth:`SearchHit.to_dict <oml_core.index.gallery.SearchHit.to_dict>`), nearest first."""

    query: str
    match: bool | None
    results: list[dict[str, Any]]


@dataclass(frozen=True)
class SearchAnswer(Answer):
    """The answer to the queries of one search (see the module)."""

    index: str
    threshold: float | None
    calibration_stale: bool
    queries: list[QueryAnswer]

    def as_text(self) -> str:
        """The table form: per query a line (its name and verdict), then one line per gallery item (rank, distance,
        match when calibrated, label, id, path), columns aligned. A stale calibration is said on each verdict,
        with the command that calibrates it again. Names, labels, ids and paths come from the index's files and the
        queries: their control characters are escaped (:func:`~oml_core.utils.text.printable`)."""
        threshold = self.threshold
        stale = (
            f" (calibration stale: oml index calibrate {printable(self.index)})"
            if self.calibration_stale
            else ""
        )
        lines = []
        for query in self.queries:
            if threshold is None:
                verdict = "(the index is not calibrated: distances only)"
            else:
                verdict = f"{'match' if query.match else 'no match'} (threshold {threshold:.6g}){stale}"
            lines.append(f"{printable(query.query)}: {verdict}")
            header = [
                "rank",
                "distance",
                *(["match"] if threshold is not None else []),
                "label",
                "id",
                "path",
            ]
            rows = [
                [
                    str(hit["rank"]),
                    f"{hit['distance']:.6f}",
                    *(["match" if hit["match"] else "no match"] if threshold is not None else []),
                    "-" if hit["label"] is None else printable(hit["label"]),
                    printable(hit["id"]),
                    printable(hit["path"]) if hit["path"] else "-",
                ]
                for hit in query.results
            ]
            widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
            for row in [header, *rows]:
                lines.append("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        return "\n".join(lines)


def search_answer(
    index: str | Path,
    threshold: float | None,
    names: Sequence[str],
    hits: Sequence[Sequence[SearchHit]],
    *,
    calibration_stale: bool,
) -> SearchAnswer:
    """The answer to the queries named ``names`` whose hits are ``hits`` (one list per query, as
    :meth:`GalleryIndex.search <oml_core.index.gallery.GalleryIndex.search>` returns them), in an index of
    folder ``index`` calibrated to ``threshold`` (None: not calibrated), whose calibration is stale or not."""
    queries = [
        QueryAnswer(
            query=name,
            match=None if threshold is None else bool(found and found[0].match),
            results=[hit.to_dict() for hit in found],
        )
        for name, found in zip(names, hits, strict=True)
    ]
    return SearchAnswer(
        index=str(index), threshold=threshold, calibration_stale=calibration_stale, queries=queries
    )


__all__ = ["QueryAnswer", "SearchAnswer", "search_answer"]
