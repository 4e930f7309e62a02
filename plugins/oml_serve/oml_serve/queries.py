"""What a request asks about, as one item of the index's dataset component: an uploaded file (an image, an audio
clip: whatever the component reads as a query file), a text, or an embedding.

An upload is written into a private temporary folder of its own (``tempfile.mkdtemp``: readable by this user
only, outside the index and any path a request names), read there by the component into the extractor's input,
and removed before the answer: nothing of a request stays on disk. An upload is one item: a file that the
component would read as a list of queries (a CSV of paths) is refused, so a request never makes the service read a
file it names.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from oml_core.index.items import ItemInput, size_of
from oml_core.interfaces.datasets import IBaseDataset, IDatasetComponent
from oml_core.registry import ConfigError

#: Suffixes of files that dataset components read as lists of queries (never an upload).
LIST_SUFFIXES = frozenset({".csv", ".txt"})
#: What an upload's suffix may be made of (its name otherwise is never used on disk).
SAFE_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")


class RequestError(Exception):
    """A request the service cannot answer: its HTTP status (4xx) and one line naming what is wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Query:
    """One query: its name in the answer and the extractor's input (or its embedding).

    Attributes:
        name: The upload's file name, the text, or ``"embedding"``.
        input: The extractor's input of the item (None for an embedding).
        embedding: ``[dim]`` float32, for a query given as an embedding (None otherwise).
    """

    name: str
    input: ItemInput | None = None
    embedding: Tensor | None = None


def text_query(data: IDatasetComponent, text: str) -> Query:
    """The query of ``text`` (the component's :meth:`text_query_dataset
    <oml_core.interfaces.datasets.IDatasetComponent.text_query_dataset>`).

    Raises:
        RequestError: 422: an empty text, or a component that takes no texts (an index of images).
    """
    if not text.strip():
        raise RequestError(422, "text is empty")
    try:
        dataset = data.text_query_dataset([text])
    except NotImplementedError as e:
        raise RequestError(422, f"{e}: this index is searched by uploaded files or embeddings") from e
    except ConfigError as e:
        raise RequestError(422, str(e)) from e
    return Query(text, _one_input(dataset, "the text"))


def file_query(data: IDatasetComponent, filename: str, content: bytes) -> Query:
    """The query of the uploaded file ``filename`` of bytes ``content``, read by the component's
    :meth:`query_dataset <oml_core.interfaces.datasets.IDatasetComponent.query_dataset>` from a private temporary
    folder (removed before this returns); its name is ``filename``.

    Raises:
        RequestError: 422: an empty upload, a list of queries (``.csv``, ``.txt``), a file the component cannot
            read (its message, naming ``filename``), a component that takes no query files, more than one item.
    """
    name = Path(filename).name or "upload"
    suffix = Path(name).suffix.lower()
    if not content:
        raise RequestError(422, f"the upload {name!r} is empty")
    if suffix in LIST_SUFFIXES:
        raise RequestError(
            422, f"the upload {name!r} is a list of queries ({suffix}); upload one file (or send a text)"
        )
    folder = Path(tempfile.mkdtemp(prefix="oml-serve-"))
    path = folder / f"query{suffix if SAFE_SUFFIX.fullmatch(suffix) else ''}"
    try:
        path.write_bytes(content)
        try:
            dataset = data.query_dataset([str(path)])
            return Query(name, _one_input(dataset, f"the upload {name!r}"))
        except NotImplementedError as e:
            raise RequestError(422, f"{e}: this index is searched by texts or embeddings") from e
        except (ConfigError, OSError, ValueError) as e:
            raise RequestError(422, _named(str(e), path, name)) from e
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def embedding_query(values: object, dim: int) -> Query:
    """The query of the embedding ``values`` (a JSON list of ``dim`` finite numbers).

    Raises:
        RequestError: 422: not a list of numbers, another length, a value that is not finite.
    """
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    ):
        raise RequestError(422, f"embedding must be a list of {dim} numbers")
    if len(values) != dim:
        raise RequestError(422, f"embedding has {len(values)} values; this index's embeddings have {dim}")
    if not all(math.isfinite(v) for v in values):
        raise RequestError(422, "embedding holds a value that is not finite")
    return Query("embedding", embedding=torch.tensor(values, dtype=torch.float32))


def _one_input(dataset: IBaseDataset, what: str) -> ItemInput:
    """The extractor's input of the one item of ``dataset`` (read now)."""
    n = size_of(dataset)
    if n != 1:
        raise RequestError(422, f"{what} holds {n} queries; send one at a time")
    item: ItemInput = dataset[0][dataset.input_tensors_key]
    return item


def _named(message: str, path: Path, name: str) -> str:
    """``message`` with the temporary file ``path`` named as the upload ``name`` (which it names), on one line."""
    message = " ".join(message.replace(str(path), name).split())
    return message if name in message else f"the upload {name!r}: {message}"


__all__ = ["LIST_SUFFIXES", "Query", "RequestError", "embedding_query", "file_query", "text_query"]
