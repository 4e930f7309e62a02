"""The queries of ``oml search``: what the user gave, turned into items by the index's dataset component
(:meth:`~oml_core.interfaces.datasets.IDatasetComponent.query_dataset`; images: image files, folders of images and
CSVs of queries), each named by the component (:meth:`~oml_core.interfaces.datasets.IDatasetComponent.item_names`;
images: its path)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from oml_core.index.errors import GalleryIndexError
from oml_core.index.items import size_of
from oml_core.interfaces.datasets import IBaseDataset, IDatasetComponent


@dataclass(frozen=True)
class Queries:
    """Items to search by, in the order they were given.

    Attributes:
        dataset: The items, one of the dataset component's datasets.
        names: The name of each item.
    """

    dataset: IBaseDataset
    names: list[str]


def collect_queries(
    data: IDatasetComponent,
    sources: Sequence[str | Path],
    root: str | Path | None = None,
    texts: Sequence[str] = (),
) -> Queries:
    """The items of ``sources`` as the dataset component ``data`` reads queries, or of the query ``texts``
    (:meth:`~oml_core.interfaces.datasets.IDatasetComponent.text_query_dataset`), and their names.

    Args:
        data: The index's dataset component.
        sources: What the user gave (paths).
        root: The folder the relative paths inside a list of queries are joined to (``--dataset-root``).
        texts: Query texts (``oml search --text``), given instead of ``sources``.

    Raises:
        ConfigError: a query that cannot be read (the component's message, naming it).
        GalleryIndexError: both or neither of ``sources`` and ``texts``; an empty or blank source; the component
            takes no queries (or no texts), or does not name one per item.
    """
    if not sources and not texts:
        raise GalleryIndexError("the following arguments are required: QUERY (or --text TEXT)")
    if sources and texts:
        raise GalleryIndexError("give the queries as QUERY arguments or as --text, not both")
    blank = [i for i, source in enumerate(sources, start=1) if not str(source).strip()]
    if blank:  # an empty path would be read as the working folder (texts: the component checks them)
        raise GalleryIndexError(f"QUERY number {blank[0]} of {len(sources)} is empty")
    try:
        if texts:
            dataset = data.text_query_dataset(list(texts))
        else:
            dataset = data.query_dataset(
                [str(source) for source in sources], None if root is None else Path(root)
            )
        names = data.item_names(dataset)
    except NotImplementedError as e:
        given = (
            "give its queries as QUERY arguments"
            if texts
            else "this index can be searched by embeddings only"
        )
        raise GalleryIndexError(f"{e}: {given}") from e
    if len(names) != size_of(dataset):
        raise GalleryIndexError(
            f"the dataset component {type(data).__name__} names {len(names)} of its {size_of(dataset)} queries"
        )
    return Queries(dataset, names)


__all__ = ["Queries", "collect_queries"]
