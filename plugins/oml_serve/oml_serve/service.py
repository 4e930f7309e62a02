"""The index behind ``oml serve``: loaded once, its queries embedded by a :class:`~oml_serve.batcher.MicroBatcher`
(the items of concurrent requests in one forward pass), its searches answered as ``oml search --format json``
answers them (:func:`~oml_core.reports.search.search_answer`), its items and their files looked up by id, and its
changes (an item put or removed by id) written to its folder before they are acknowledged.

Every search and change holds the service's lock: a search first takes what another process committed to the
folder (``oml index add``: :meth:`GalleryIndex.refresh <oml_core.index.GalleryIndex.refresh>`, a cheap check when
nothing changed); a change is made on the index as it is on disk and committed (:meth:`GalleryIndex.commit
<oml_core.index.GalleryIndex.commit>`); when the commit fails, the index is read again from its folder, so that
nothing that was not written is searched."""

from __future__ import annotations

import asyncio
import mimetypes
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from torch import Tensor, nn

from oml_core.index import GalleryIndex, Upserted
from oml_core.index.gallery import SearchHit
from oml_core.index.items import ItemInput
from oml_core.interfaces.datasets import IBaseDataset, IDatasetComponent
from oml_core.reports.index import ItemsAdded, ItemsRemoved
from oml_core.reports.search import search_answer
from oml_serve.batcher import MicroBatcher
from oml_serve.queries import Query, RequestError
from oml_serve.settings import ServeSettings

Read = TypeVar("Read")
Done = TypeVar("Done")

#: The kinds of media an item's file may be served as (``GET /items/{id}/content``).
SERVED_MEDIA = frozenset({"image", "audio"})
#: What starts the media fragment of an item's name (the audio items of a later start: ``voice.wav#t=0.5``).
MEDIA_FRAGMENT = "#t="


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
        extractor: The extractor given to ``GalleryIndex.load`` instead of the index's own (the ONNX export of
            ``oml serve --onnx``); None: the index's.
    """

    def __init__(
        self, index: GalleryIndex, name: str, settings: ServeSettings, extractor: nn.Module | None = None
    ) -> None:
        self.index, self.name, self.settings = index, name, settings
        self._extractor = extractor
        #: Whether the index embeds files and texts (an index of embeddings only takes embeddings).
        self.has_extractor = extractor is not None or index.config["extractor"] is not None
        #: Whether the items' names may be files to serve: not in an index of texts, whose names are texts (a
        #: writer's ``POST /items`` text such as ``/home/me/photo.jpg`` is no file of the gallery).
        self.names_files = not (self.has_extractor and takes_texts(index.data))
        #: The dimension of the index's embeddings (read once: the threads that change the index never race it).
        self.dim = int(index.embeddings.shape[1])
        self.batcher: MicroBatcher[ItemInput, Tensor] = MicroBatcher(
            self._embed_batch, settings.max_batch, settings.max_wait_ms
        )
        #: Held by every search and write of the index (the extractor runs outside it).
        self.lock = asyncio.Lock()
        #: The one thread that reads queries into extractor inputs (a tokenizer may not be shared by threads).
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oml-serve-read")

    def warm_up(self) -> None:
        """Build the extractor and check the index's probe with it (:meth:`GalleryIndex.embed
        <oml_core.index.GalleryIndex.embed>` of no item), so that a replaced model is refused before the
        service starts and the first request waits for no model.

        Raises:
            GalleryIndexError: see :meth:`GalleryIndex.embed <oml_core.index.GalleryIndex.embed>`.
        """
        self._warm(self.index)

    def _warm(self, index: GalleryIndex) -> None:
        """Build ``index``'s extractor (checking the probe) and the dataset component that reads the queries."""
        if self.has_extractor:
            index.embed(Inputs([]))
            _ = index.data

    async def read(self, reader: Callable[..., Read], *args: Any) -> Read:
        """``reader(*args)`` on the service's thread of query reading (decoding a file, tokenizing a text)."""
        return await asyncio.get_running_loop().run_in_executor(self._reader, reader, *args)

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
        """The answer of ``oml search --format json`` for ``query`` (its ``top_k`` nearest items), in the index as
        its folder holds it now."""
        embedding = await self.embed(query)
        async with self.lock:
            hits, threshold, stale = await asyncio.to_thread(self._search, embedding, top_k)
        return search_answer(self.name, threshold, [query.name], hits, calibration_stale=stale).as_data()

    def _search(self, embedding: Tensor, top_k: int) -> tuple[list[list[SearchHit]], float | None, bool]:
        """The hits of ``embedding`` after taking another process's commit, with the threshold and whether it is
        stale (read together, under the lock)."""
        self.index.refresh()
        return self.index.search(embedding[None], top_k), self.threshold, self.index.calibration_stale

    async def put(self, query: Query, item_id: int | None, label: int | None) -> dict[str, Any]:
        """Put the item of ``query`` into the index by id (a new id: added; an id the index has: replaced; None:
        the index's ``next_id``, never a removed item's), named by the upload's file name or the text (an
        embedding: no name), and commit it.

        Returns:
            ``{"id", "added", "updated", "generation"}``: the id and the answer of ``oml index add``
            (:class:`~oml_core.reports.index.ItemsAdded`).

        Raises:
            GalleryIndexError: the commit failed (e.g. another writer held the folder's lock); see
                :meth:`GalleryIndex.upsert <oml_core.index.GalleryIndex.upsert>`.
        """
        embedding = await self.embed(query)
        path = None if query.embedding is not None else query.name

        def upsert(index: GalleryIndex) -> tuple[int, Upserted]:
            new_id = item_id if item_id is not None else index.next_id  # the id the index gives it
            ids = None if item_id is None else [item_id]  # given by the index: never another writer's item
            return new_id, index.upsert(embedding[None], ids=ids, labels=[label], paths=[path])

        (new_id, done), generation = await self._change(upsert)
        return {"id": new_id, **ItemsAdded(done.added, done.updated, generation).as_data()}

    async def remove(self, item_id: int) -> dict[str, Any]:
        """Remove the item ``item_id`` and commit it.

        Returns:
            ``{"id", "removed", "generation"}``: the id and the answer of ``oml index remove``
            (:class:`~oml_core.reports.index.ItemsRemoved`).

        Raises:
            UnknownItemError: no item has ``item_id`` (nothing changed).
            GalleryIndexError: the commit failed.
        """
        removed, generation = await self._change(lambda index: index.remove([item_id]))
        return {"id": item_id, **ItemsRemoved(removed, generation).as_data()}

    async def _change(self, change: Callable[[GalleryIndex], Done]) -> tuple[Done, int]:
        async with self.lock:
            return await asyncio.to_thread(self._committed, change)

    def _committed(self, change: Callable[[GalleryIndex], Done]) -> tuple[Done, int]:
        """``change(index)``'s result on the index as its folder holds it, and the generation that commits it; when
        the commit fails, the index is read again from its folder (the change is not kept) and the error raised."""
        index = self.index
        index.refresh()
        done = change(index)
        try:
            generation = index.commit(timeout=self.settings.lock_timeout)
        except Exception:
            self.index = self._reloaded()
            raise
        return done, generation

    def _reloaded(self) -> GalleryIndex:
        """The index read again from its folder, its extractor built and checked (as at the start)."""
        index = self.index
        again = GalleryIndex.load(
            Path(self.name), registry=index.registry, device=index.device, extractor=self._extractor
        )
        self._warm(again)
        return again

    async def item(self, item_id: int) -> dict[str, Any]:
        """``{id, path, label, content_type}`` of the item ``item_id``: its path (an image's, an audio file's) or
        its text, its label (None: unknown) and the media type of its file as ``GET /items/{id}/content``
        serves it (None: it has no file to serve, e.g. a text).

        Raises:
            UnknownItemError: no such item.
        """
        async with self.lock:
            item = self.index.item(item_id)
        return {**item.to_dict(), "content_type": _media_type(item.path) if self.names_files else None}

    async def content(self, item_id: int) -> tuple[Path, str]:
        """The file of the gallery item ``item_id`` and its media type: an image or an audio file that the
        index names by an absolute path (only the index's own items: never a path of a request).

        Raises:
            UnknownItemError: no such item.
            RequestError: 404, an item that is no image or audio file (a text, an embedding), a file that is gone.
        """
        async with self.lock:
            path = self.index.item(item_id).path
        media_type = _media_type(path) if self.names_files else None
        if path is None or media_type is None:
            raise RequestError(404, f"item {item_id} has no image or audio file to serve")
        file = Path(served_file(path))
        if not file.is_file():
            raise RequestError(404, f"item {item_id}'s file {file} is missing")
        return file, media_type

    def health(self) -> dict[str, Any]:
        """``{status, items, dim, backend, device, extractor, generation, threshold, calibration_stale,
        forward_passes, queries_embedded}`` of the service: what runs the model (``pytorch``, or ``onnx`` for
        ``--onnx``), the generation of the index's folder it holds (see
        :attr:`GalleryIndex.generation <oml_core.index.GalleryIndex.generation>`), and the extractor's passes
        over batches of queries and the queries they embedded."""
        return {
            "status": "ok",
            "items": len(self.index),
            "dim": self.dim,
            "backend": self.index.config["knn_backend"]["name"],
            "device": str(self.index.device or "cpu"),
            "extractor": "onnx" if self._extractor is not None else "pytorch",
            "generation": self.index.generation,
            "threshold": self.threshold,
            "calibration_stale": self.index.calibration_stale,
            "forward_passes": self.batcher.batches_run,
            "queries_embedded": self.batcher.items_run,
        }

    async def aclose(self) -> None:
        """Stop the batcher and the reading thread."""
        await self.batcher.aclose()
        self._reader.shutdown(wait=True)


def takes_texts(data: IDatasetComponent) -> bool:
    """Whether the dataset component ``data`` reads query texts (it implements :meth:`text_query_dataset
    <oml_core.interfaces.datasets.IDatasetComponent.text_query_dataset>`): its items are named by their texts."""
    return type(data).text_query_dataset is not IDatasetComponent.text_query_dataset


def served_file(path: str) -> str:
    """The file of an item named ``path``: ``path`` without its media fragment (``/a/voice.wav#t=0.5``, an
    audio item that starts 0.5 s in, is the file ``/a/voice.wav``), unless ``path`` is a file itself."""
    file, fragment, _ = path.rpartition(MEDIA_FRAGMENT)
    return file if fragment and not Path(path).is_file() else path


def _media_type(path: str | None) -> str | None:
    """The media type of the file ``path`` when it is served (an absolute path of an image or audio file, or
    such a path with a media fragment)."""
    if path is None or not Path(path).is_absolute():
        return None
    media_type, _ = mimetypes.guess_type(Path(served_file(path)).name)
    return media_type if media_type is not None and media_type.split("/")[0] in SERVED_MEDIA else None


__all__ = ["SERVED_MEDIA", "Inputs", "ServedIndex"]
