"""The index behind ``oml serve``: loaded once, its queries embedded by a :class:`~oml_serve.batcher.MicroBatcher`
(the items of concurrent requests in one forward pass), its searches answered as ``oml search --format json``
answers them (:func:`~oml_core.index.answers.search_answer`), its items and their files looked up by id."""

from __future__ import annotations

import asyncio
import mimetypes
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from torch import Tensor

from oml_core.index import GalleryIndex
from oml_core.index.answers import search_answer
from oml_core.index.items import ItemInput
from oml_core.interfaces.datasets import IBaseDataset
from oml_serve.batcher import MicroBatcher
from oml_serve.queries import Query, RequestError
from oml_serve.settings import ServeSettings

Read = TypeVar("Read")

#: The kinds of media an item's file may be served as (``GET /items/{id}/content``).
SERVED_MEDIA = frozenset({"image", "audio"})


class Inputs(IBaseDataset):
    """Items given by their extractor inputs (the queries of one batch), in order.

    Args:
        inputs: One extractor input per item, as a dataset's item holds it (not batched).
    """

    def __init__(self, inputs: Sequence[ItemInput]) -> None:
        self.inputs = list(inputs)

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {self.input_tensors_key: self.inputs[item], self.index_key: item}


class ServedIndex:
    """A loaded :class:`~oml_core.index.GalleryIndex` served to concurrent requests.

    Args:
        index: The index (``GalleryIndex.load``), its extractor on the device it embeds on.
        name: The index as ``oml serve`` was given it: the ``index`` of every answer, as ``oml search`` names it.
        settings: The service's settings (the batcher's ``max_batch`` and ``max_wait_ms``).
    """

    def __init__(self, index: GalleryIndex, name: str, settings: ServeSettings) -> None:
        self.index, self.name, self.settings = index, name, settings
        #: Whether the index embeds files and texts (an index of embeddings only takes embeddings).
        self.has_extractor = index.config["extractor"] is not None
        self.batcher: MicroBatcher[ItemInput, Tensor] = MicroBatcher(
            self._embed_batch, settings.max_batch, settings.max_wait_ms
        )
        #: Held by every search and write of the index (the extractor runs outside it).
        self.lock = asyncio.Lock()
        #: The one thread that reads queries into extractor inputs (a tokenizer may not be shared by threads).
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oml-serve-read")
        self._positions = {item_id: position for position, item_id in enumerate(index.ids)}

    def warm_up(self) -> None:
        """Build the extractor and check the index's probe with it (:meth:`GalleryIndex.embed
        <oml_core.index.GalleryIndex.embed>` of no item), so that a replaced model is refused before the
        service starts and the first request waits for no model.

        Raises:
            GalleryIndexError: see :meth:`GalleryIndex.embed <oml_core.index.GalleryIndex.embed>`.
        """
        if self.has_extractor:
            self.index.embed(Inputs([]))
            _ = self.index.data  # the dataset component that reads the queries, built now

    async def read(self, reader: Callable[..., Read], *args: Any) -> Read:
        """``reader(*args)`` on the service's thread of query reading (decoding a file, tokenizing a text)."""
        return await asyncio.get_running_loop().run_in_executor(self._reader, reader, *args)

    @property
    def dim(self) -> int:
        """The dimension of the index's embeddings."""
        return int(self.index.embeddings.shape[1])

    @property
    def threshold(self) -> float | None:
        """The calibrated match threshold (None: not calibrated)."""
        return None if self.index.calibration is None else self.index.calibration.threshold

    def check_takes_items(self) -> None:
        """Refuse a query that needs the extractor when the index has none.

        Raises:
            RequestError: 422, the index was built from embeddings without an extractor.
        """
        if not self.has_extractor:
            raise RequestError(
                422, "this index has no extractor (it was built from embeddings): search it by embedding"
            )

    async def embed(self, query: Query) -> Tensor:
        """``[dim]``: the query's embedding, computed in a batch with concurrent queries (or as given)."""
        if query.embedding is not None:
            return query.embedding
        self.check_takes_items()
        assert query.input is not None
        return await self.batcher.submit(query.input)

    def _embed_batch(self, inputs: list[ItemInput]) -> list[Tensor]:
        """The embeddings of a batch of queries, in one pass of the extractor."""
        return list(self.index.embed(Inputs(inputs)))

    async def search(self, query: Query, top_k: int) -> dict[str, Any]:
        """The answer of ``oml search --format json`` for ``query`` (its ``top_k`` nearest items)."""
        embedding = await self.embed(query)
        async with self.lock:
            hits = await asyncio.to_thread(self.index.search, embedding[None], top_k)
        return search_answer(self.name, self.threshold, [query.name], hits)

    def _position(self, item_id: int) -> int:
        position = self._positions.get(item_id)
        if position is None:
            raise RequestError(404, f"no item {item_id} in the index")
        return position

    def item(self, item_id: int) -> dict[str, Any]:
        """``{id, path, label, content_type}`` of the item ``item_id``: its path (an image's, an audio file's) or
        its text, its label (None: unknown) and the media type of its file as ``GET /items/{id}/content``
        serves it (None: it has no file to serve, e.g. a text).

        Raises:
            RequestError: 404, no such item.
        """
        position = self._position(item_id)
        path = self.index.paths[position]
        return {
            "id": item_id,
            "path": path,
            "label": self.index.labels[position],
            "content_type": _media_type(path),
        }

    def content(self, item_id: int) -> tuple[Path, str]:
        """The file of the gallery item ``item_id`` and its media type: an image or an audio file that the
        index names by an absolute path (only the index's own items: never a path of a request).

        Raises:
            RequestError: 404, no such item, an item that is no image or audio file (a text, an embedding), a
                file that is gone.
        """
        path = self.index.paths[self._position(item_id)]
        media_type = _media_type(path)
        if path is None or media_type is None:
            raise RequestError(404, f"item {item_id} has no image or audio file to serve")
        file = Path(path)
        if not file.is_file():
            raise RequestError(404, f"item {item_id}'s file {file} is missing")
        return file, media_type

    def health(self) -> dict[str, Any]:
        """``{status, items, dim, backend, device, threshold, forward_passes, queries_embedded}`` of the service:
        the last two count the extractor's passes over batches of queries and the queries they embedded."""
        return {
            "status": "ok",
            "items": len(self.index),
            "dim": self.dim,
            "backend": self.index.config["knn_backend"]["name"],
            "device": str(self.index.device or "cpu"),
            "threshold": self.threshold,
            "forward_passes": self.batcher.batches_run,
            "queries_embedded": self.batcher.items_run,
        }

    async def aclose(self) -> None:
        """Stop the batcher and the reading thread."""
        await self.batcher.aclose()
        self._reader.shutdown(wait=True)


def _media_type(path: str | None) -> str | None:
    """The media type of the file ``path`` when it is served (an absolute path of an image or audio file)."""
    if path is None or not Path(path).is_absolute():
        return None
    media_type, _ = mimetypes.guess_type(Path(path).name)
    return media_type if media_type is not None and media_type.split("/")[0] in SERVED_MEDIA else None


__all__ = ["SERVED_MEDIA", "Inputs", "ServedIndex"]
