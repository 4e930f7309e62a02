"""``GalleryIndex``: a gallery of images (or of embeddings) to serve: build it, search it by images or
embeddings, calibrate a match threshold, save it to a folder and load it back.

Example::

    from oml_core.index import GalleryIndex

    index = GalleryIndex.from_dataframe(
        df, dataset_root="my_dataset",
        extractor={"name": "resnet", "args": {"weights": "best.ckpt", "arch": "resnet18", "gem_p": None,
                                              "remove_fc": True, "normalise_features": True}},
        transforms={"name": "norm_resize", "args": {"im_size": 64}},
        knn_backend="exact", calibration={"target": "precision", "value": 0.9},
    )
    index.save("my_index")
    hits = GalleryIndex.load("my_index").search(["query.jpg"], top_k=5)  # [[SearchHit(...), ...]]
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from oml_core.const import (
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    PATHS_COLUMN,
    SEQUENCE_COLUMN,
    SPLIT_COLUMN,
    TBBox,
)
from oml_core.datasets.dataframe_format import check_retrieval_dataframe_format, parse_bboxes, parse_flags
from oml_core.datasets.images import ImageBaseDataset
from oml_core.index.calibration import Calibration, CalibrationError, calibrate_rr, check_target
from oml_core.index.errors import GalleryIndexError
from oml_core.index.integrity import check_model, check_probe, model_json, rebuilt_spec
from oml_core.index.storage import (
    BACKEND_FOLDER,
    CALIBRATION_FILE,
    CALIBRATION_PLOT,
    EMBEDDINGS_FILE,
    INDEX_FILE,
    INDEX_FORMAT,
    INDEX_VERSION,
    ITEMS_FILE,
    PROBE_FILE,
    WEIGHTS_FILE,
    StoredEmbeddings,
    new_folder,
    read_embeddings,
    read_json,
    read_weights,
    write_embeddings,
    write_json,
    write_probe_image,
    write_weights,
)
from oml_core.inference.flat import inference
from oml_core.interfaces.knn import IKnnIndex
from oml_core.registry import Registry, RegistryError, default_registry, to_plain
from oml_core.retrieval.knn_backends import check_distance, check_k, make_knn_index, search_with_index
from oml_core.retrieval.retrieval_results import RetrievalResults, factorize
from oml_core.utils.images import IMAGE_SUFFIXES, find_images

#: Which rows of a dataframe :meth:`GalleryIndex.from_dataframe` puts in the gallery.
GALLERY_ROWS = ("all", "gallery")

#: The keyword arguments of :meth:`GalleryIndex.calibrate` that ``from_dataframe(calibration=...)`` takes.
CALIBRATE_ARGS = frozenset({"target", "value", "top_n"})
#: A component given by its spec (``{name, args}`` or a name), built by the registry.
Spec = Mapping[str, Any] | str


@dataclass(frozen=True)
class SearchHit:
    """One gallery item found for a query.

    Attributes:
        rank: 1 for the nearest item.
        id: The item's id.
        path: Its image path (None for an item added as an embedding without a path).
        label: Its label (None when unknown).
        distance: Its distance to the query.
        match: ``distance < threshold`` of the index's calibration; None when the index is not calibrated.
    """

    rank: int
    id: int
    path: str | None
    label: int | None
    distance: float
    match: bool | None

    def to_dict(self) -> dict[str, Any]:
        """The hit as a JSON-able dict."""
        return asdict(self)


class GalleryIndex:
    """Gallery items (their embeddings, ids, image paths and labels) in a knn backend, with the extractor and
    transforms that embed query images, and optionally a calibrated match threshold.

    Args:
        extractor: The extractor that embeds images: a ``{name, args}`` spec (or a name) built by ``registry``
            (``args.weights``: a checkpoint path, a zoo key or null for random weights, seeded by ``seed``), or a
            model object. None: the index takes embeddings only. A spec is built on first use and saved with the
            index (a relative ``args.weights`` naming an existing file is made absolute); an object is not saved.
        transforms: Applied to every image before the extractor: a spec (saved) or a callable (not saved);
            None: images are only normalised and made tensors.
        knn_backend: The registered ``knn_backend`` that searches the embeddings: a name or ``{name, args}``
            (``args.distance``, if given, must be ``distance``). Any registered backend works, a plugin's too.
        distance: ``"l2"`` or ``"cosine"``.
        registry: Where the components are looked up (``default_registry()`` when None).
        seed: Seeds the building of the extractor, so that random weights are the same at every build.
        batch_size: Images per batch of the extractor.
        num_workers: Workers of the loader of images.

    Raises:
        ValueError: a distance other than ``l2``, ``cosine`` (or another than the backend's); a spec that is
            not JSON values.
        RegistryError: an unknown knn backend (with the close matches).
    """

    def __init__(
        self,
        extractor: Spec | nn.Module | None = None,
        transforms: Spec | Callable[[Any], Any] | None = None,
        knn_backend: Spec = "exact",
        distance: str = "l2",
        *,
        registry: Registry | None = None,
        seed: int = 42,
        batch_size: int = 64,
        num_workers: int = 0,
    ) -> None:
        self.distance = check_distance(distance)
        self.seed, self.batch_size, self.num_workers = seed, batch_size, num_workers
        self._registry = registry
        self._extractor_spec, self._extractor = _spec_or_object(extractor, "extractor")
        if self._extractor_spec is not None:
            self._extractor_spec = _with_absolute_weights(self._extractor_spec)
        self._transforms_spec, self._transforms = _spec_or_object(transforms, "transforms")
        backend_spec, _ = _spec_or_object(knn_backend, "knn_backend")
        if backend_spec is None:
            raise ValueError(
                f"knn_backend must be a registered name or a {{name, args}} spec, got {knn_backend!r}"
            )
        backend_distance = backend_spec["args"].setdefault("distance", self.distance)
        if backend_distance != self.distance:
            raise ValueError(
                f"the knn backend's args.distance is {backend_distance!r} but the index's distance is "
                f"{self.distance!r}; give one distance"
            )
        self._backend_spec = backend_spec
        self._backend = make_knn_index(backend_spec, self.distance, self.registry)
        self._chunks: list[Tensor] = []
        self._ids: list[int] = []
        self._paths: list[str | None] = []
        self._labels: list[int | None] = []
        #: A loaded index's weights file and its sha256: the extractor spec is rebuilt with them.
        self._weights: tuple[Path, str] | None = None
        #: A loaded index's probe picture and its embedding at build time; checked before the first query.
        self._probe: tuple[Path, Tensor] | None = None
        self._probe_checked = False
        #: The calibrated match threshold (None: search answers no match / no-match).
        self.calibration: Calibration | None = None

    # ---------------------------------------------------------------------------------------- building
    @classmethod
    def from_dataframe(
        cls,
        df: pd.DataFrame,
        dataset_root: str | Path | None = None,
        *,
        rows: str = "all",
        calibration: Mapping[str, Any] | None = None,
        **index_args: Any,
    ) -> GalleryIndex:
        """An index of the rows of a dataframe in OML's format (checked first; images are cropped to their
        boxes when it has ``x_1, x_2, y_1, y_2``).

        The items' ids are their row positions (0-based, as ``oml check-dataframe`` names rows), their paths
        absolute (``dataset_root / path``), their labels the ``label`` column.

        Args:
            df: The dataframe.
            dataset_root: The folder its ``path`` column is relative to (None: paths as they are).
            rows: ``"all"``: every row is a gallery item (train and validation); ``"gallery"``: only the rows
                whose ``is_gallery`` is true (train rows, whose flags are empty, are left out).
            calibration: When given, the keyword arguments of :meth:`calibrate` (``target``, ``value``,
                ``top_n``): the threshold is calibrated on the ``split == "validation"`` rows, their queries
                against their gallery items (their embeddings are computed once, with the gallery's).
            index_args: The arguments of :class:`GalleryIndex`.

        Raises:
            DataFrameFormatError: ``df`` is not in OML's format (naming the column and rows).
            ValueError: ``rows`` is neither ``all`` nor ``gallery``; ``calibration`` with other keys or a bad
                target or value, or on a dataframe without validation rows (checked before any image is read).
            GalleryIndexError: an image that cannot be read.
            CalibrationError: the validation rows cannot give a threshold for the target.
        """
        if rows not in GALLERY_ROWS:
            raise ValueError(f"rows must be one of {list(GALLERY_ROWS)}, got {rows!r}")
        check_retrieval_dataframe_format(df, dataset_root=dataset_root, verbose=False)
        df = df.reset_index(drop=True)
        is_validation = (df[SPLIT_COLUMN] == "validation").to_numpy()
        if calibration is not None:
            check_calibration_args(calibration)
            if not is_validation.any():
                raise ValueError("the dataframe has no split=validation rows to calibrate the threshold on")
        is_gallery = parse_flags(df[IS_GALLERY_COLUMN])[0]
        in_gallery = np.ones(len(df), dtype=bool) if rows == "all" else is_gallery
        needed = in_gallery | (is_validation if calibration is not None else False)
        root = None if dataset_root is None else Path(dataset_root).absolute()
        paths = [str(p if root is None else root / str(p)) for p in df[PATHS_COLUMN]]
        bboxes = parse_bboxes(df)
        labels = df[LABELS_COLUMN].to_numpy()

        index = cls(**index_args)
        embeddings = torch.zeros(len(df), 0)
        if needed.any():
            rows_needed = np.flatnonzero(needed)
            computed = index._embed(
                [paths[i] for i in rows_needed], None if bboxes is None else [bboxes[i] for i in rows_needed]
            )
            embeddings = torch.zeros(len(df), computed.shape[1])
            embeddings[torch.tensor(rows_needed)] = computed
        gallery_rows = np.flatnonzero(in_gallery)
        if len(gallery_rows):
            index._add(
                embeddings[torch.tensor(gallery_rows)],
                [paths[i] for i in gallery_rows],
                labels[gallery_rows],
                gallery_rows.tolist(),
            )
        if calibration is not None:
            val = df[is_validation]
            index.calibrate(
                embeddings[torch.tensor(is_validation)],
                labels[is_validation],
                parse_flags(val[IS_QUERY_COLUMN])[0],
                is_gallery[is_validation],
                sequences=val[SEQUENCE_COLUMN].to_numpy() if SEQUENCE_COLUMN in val.columns else None,
                **calibration,
            )
        return index

    @classmethod
    def from_folder(cls, folder: str | Path, **index_args: Any) -> GalleryIndex:
        """An index of every image under ``folder`` (:data:`IMAGE_SUFFIXES`, any case, searched recursively),
        in the sorted order of their paths, without labels.

        Raises:
            GalleryIndexError: ``folder`` is not a folder, holds no image, or an image cannot be read.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise GalleryIndexError(f"{folder}: no such folder of images")
        files = find_images(folder)
        if not files:
            raise GalleryIndexError(f"{folder}: holds no image files ({', '.join(IMAGE_SUFFIXES)})")
        index = cls(**index_args)
        index.add(files)
        return index

    # ------------------------------------------------------------------------------------------ items
    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        calibrated = "calibrated" if self.calibration is not None else "not calibrated"
        return (
            f"{type(self).__name__}({len(self)} items, knn_backend={self._backend_spec['name']!r}, "
            f"distance={self.distance!r}, {calibrated})"
        )

    @property
    def embeddings(self) -> Tensor:
        """``[n, dim]`` float32 embeddings of the items, in the order they were added."""
        if len(self._chunks) > 1:
            self._chunks = [torch.cat(self._chunks)]
        return self._chunks[0] if self._chunks else torch.zeros(0, 0)

    @property
    def ids(self) -> list[int]:
        """The items' ids."""
        return list(self._ids)

    @property
    def paths(self) -> list[str | None]:
        """The items' image paths (None for an embedding added without one)."""
        return list(self._paths)

    @property
    def labels(self) -> list[int | None]:
        """The items' labels (None when unknown)."""
        return list(self._labels)

    @property
    def config(self) -> dict[str, Any]:
        """What builds this index again (saved with it): the extractor, transforms and knn backend specs (None
        for objects), the distance, the seed, the batch size and the number of workers."""
        return {
            "extractor": self._extractor_spec,
            "transforms": self._transforms_spec,
            "knn_backend": self._backend_spec,
            "distance": self.distance,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
        }

    @property
    def registry(self) -> Registry:
        """The registry that builds the components."""
        return self._registry if self._registry is not None else default_registry()

    @property
    def extractor(self) -> nn.Module:
        """The extractor (built from its spec on first use, seeded with ``seed``). A loaded index rebuilds it
        from its spec with every ``weights`` argument null and loads the weights saved in its folder
        (``weights.pt``, checked against its sha256): no file outside the folder is read.

        Raises:
            GalleryIndexError: the index has no extractor, or its spec cannot be built (a weights file that does
                not exist or does not fit), or its saved weights are not those it was built with.
            RegistryError: its name is not registered (e.g. its plugin is not installed).
        """
        if self._extractor is None:
            if self._extractor_spec is None:
                raise GalleryIndexError(
                    "this index has no extractor (it was built from embeddings, or with an extractor object, "
                    "which is not saved): give one (GalleryIndex.load(folder, extractor=...)) to embed images"
                )
            if self._weights is None:
                self._extractor = self._build("extractor", self._extractor_spec)
            else:
                self._extractor = self._build_with_saved_weights(self._extractor_spec, *self._weights)
        return self._extractor

    def _build_with_saved_weights(self, spec: dict[str, Any], weights_file: Path, sha256: str) -> nn.Module:
        """The extractor of ``spec`` with null ``weights``, loaded strictly with the state dict of
        ``weights_file`` (whose sha256 is checked first)."""
        state_dict = read_weights(weights_file, sha256)
        extractor = self._build("extractor", rebuilt_spec(spec))
        try:
            extractor.load_state_dict(state_dict, strict=True)
        except RuntimeError as e:
            raise GalleryIndexError(
                f"{weights_file}: does not fit the index's extractor {spec['name']!r} ({e})"
            ) from e
        return extractor

    @property
    def transforms(self) -> Callable[[Any], Any] | None:
        """The transforms of the images (built from their spec on first use)."""
        if self._transforms is None and self._transforms_spec is not None:
            self._transforms = self._build("transforms", self._transforms_spec)
        return self._transforms

    def _build(self, kind: str, spec: dict[str, Any]) -> Any:
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                return self.registry.build(kind, spec)
        except RegistryError:
            raise
        except (FileNotFoundError, ValueError) as e:
            raise GalleryIndexError(f"the index's {kind} {spec['name']!r} cannot be built: {e}") from e

    def embed(self, paths: Sequence[str | Path], bboxes: Sequence[TBBox | None] | None = None) -> Tensor:
        """``[len(paths), dim]`` float32 embeddings of the images ``paths`` (cropped to ``bboxes``, then the
        transforms, then the extractor).

        A loaded index first embeds its probe picture and checks it against its embedding at build time
        (:func:`~oml_core.index.integrity.check_probe`), once.

        Args:
            paths: The image files.
            bboxes: One box ``(x_1, y_1, x_2, y_2)`` (or None: the whole image) per image; None: no boxes.

        Raises:
            ValueError: ``bboxes`` of another length.
            GalleryIndexError: an image that does not exist (checked before the extractor is built) or cannot
                be read (the message names it); the extractor or transforms do not reproduce the probe's
                embedding; see :attr:`extractor`.
        """
        if bboxes is not None and len(bboxes) != len(paths):
            raise ValueError(f"bboxes must have one entry per image ({len(paths)}), got {len(bboxes)}")
        return self._embed([str(p) for p in paths], None if bboxes is None else list(bboxes))

    def _embed(self, paths: list[str], bboxes: list[Any] | None) -> Tensor:
        missing = next((p for p in paths if not Path(p).is_file()), None)
        if missing is not None:
            if Path(missing).is_dir():
                raise GalleryIndexError(f"'{missing}' is a directory, not an image file")
            raise GalleryIndexError(f"image file not found: '{missing}'")
        self._check_probe()
        return self._infer(paths, bboxes)

    def _check_probe(self) -> None:
        """A loaded index's probe picture embedded by the extractor and transforms in use, checked against its
        embedding at build time (once)."""
        if self._probe is not None and not self._probe_checked:
            probe_file, built = self._probe
            check_probe(built, self._infer([str(probe_file)], None)[0], probe_file)
            self._probe_checked = True

    def _infer(self, paths: list[str], bboxes: list[Any] | None) -> Tensor:
        dataset = ImageBaseDataset(paths, bboxes=bboxes, transform=self.transforms)
        extractor = self.extractor
        try:
            return inference(extractor, dataset, batch_size=self.batch_size, num_workers=self.num_workers)
        except OSError as e:  # an image that does not decode (imread_pil names it)
            raise GalleryIndexError(str(e)) from e

    def add(
        self,
        items: Tensor | Sequence[str | Path],
        labels: Sequence[int | None] | None = None,
        ids: Sequence[int] | None = None,
        paths: Sequence[str | Path | None] | None = None,
    ) -> None:
        """Add gallery items: ``[n, dim]`` embeddings, or images (paths) embedded by :meth:`embed`.

        Args:
            items: The embeddings, or the image paths (their ``paths``).
            labels: ``n`` integer labels (None entries: unknown); None: all unknown.
            ids: ``n`` distinct integer ids, none of them already in the index; None: the integers after the
                largest id so far (0, 1, ... in a new index).
            paths: With embeddings, the image path of each (or None); not with images.

        Raises:
            ValueError: labels, ids or paths of another length, not integers, ids already taken, embeddings
                that are not finite or of another dimension than the index's.
            GalleryIndexError: see :meth:`embed`.
        """
        if isinstance(items, Tensor):
            n = len(items)
            item_paths: list[str | None] = (
                [None] * n if paths is None else [None if p is None else str(p) for p in paths]
            )
            embeddings = items
        else:
            if paths is not None:
                raise ValueError("paths go with embeddings; added images are their own paths")
            image_paths = [str(p) for p in ([items] if isinstance(items, str | Path) else items)]
            embeddings = self.embed(image_paths) if image_paths else torch.zeros(0, 0)
            item_paths = list(image_paths)
        self._add(embeddings, item_paths, labels, ids)

    def _add(
        self,
        embeddings: Tensor,
        paths: list[str | None],
        labels: Sequence[Any] | None,
        ids: Sequence[int] | None,
    ) -> None:
        n = len(embeddings)
        if n == 0:
            return
        if len(paths) != n:
            raise ValueError(f"paths must have one entry per item ({n}), got {len(paths)}")
        labels_list = [None] * n if labels is None else _labels(labels, n)
        ids_list = self._new_ids(ids, n)
        embeddings = embeddings.detach().float().cpu()
        positions = torch.arange(len(self), len(self) + n)
        self._backend.add(embeddings, ids=positions)  # validates the embeddings before anything is kept
        self._chunks.append(embeddings)
        self._ids += ids_list
        self._paths += paths
        self._labels += labels_list

    def _new_ids(self, ids: Sequence[int] | None, n: int) -> list[int]:
        if ids is None:
            start = max(self._ids) + 1 if self._ids else 0
            return list(range(start, start + n))
        values = list(ids)
        if len(values) != n or not all(_is_int(v) for v in values):
            raise ValueError(f"ids must be {n} integers, one per item, got {len(values)} values")
        values = [int(v) for v in values]
        taken = set(self._ids)
        seen: set[int] = set()
        for value in values:
            if value in taken or value in seen:
                raise ValueError(f"id {value} is given to two items; ids must be distinct")
            seen.add(value)
        return values

    # ----------------------------------------------------------------------------------------- search
    def search(
        self,
        queries: Tensor | Sequence[str | Path] | str | Path,
        top_k: int = 5,
        *,
        bboxes: Sequence[TBBox | None] | None = None,
    ) -> list[list[SearchHit]]:
        """The ``top_k`` nearest gallery items of every query, nearest first.

        Args:
            queries: ``[Q, dim]`` embeddings, or image paths (one or a sequence) embedded by :meth:`embed`.
            top_k: Items per query (fewer when the gallery is smaller).
            bboxes: With image paths, the box of each to crop it to (see :meth:`embed`).

        Returns:
            One list of :class:`SearchHit` per query; ``match`` is ``distance < threshold`` when the index is
            calibrated, else None.

        Raises:
            ValueError: ``top_k`` is not a positive integer; embeddings of another dimension than the index's;
                ``bboxes`` with embeddings, or of another length than the paths.
            GalleryIndexError: see :meth:`embed`.
        """
        check_k(top_k)
        if isinstance(queries, Tensor):
            if bboxes is not None:
                raise ValueError("bboxes go with image paths, not with embeddings")
            embeddings = queries.detach().float().cpu()
        else:
            paths = [str(p) for p in ([queries] if isinstance(queries, str | Path) else queries)]
            if not paths:
                return []
            embeddings = self.embed(paths, bboxes)
        if len(embeddings) == 0:
            return []
        found = self._backend.search(embeddings, top_k)
        if self.calibration is None:
            matches = [[None] * top_k] * len(embeddings)
        else:
            matches = self.calibration.is_match(found.distances).tolist()
        return [
            [
                SearchHit(
                    rank=rank,
                    id=self._ids[position],
                    path=self._paths[position],
                    label=self._labels[position],
                    distance=distance,
                    match=match,
                )
                for rank, (position, distance, match) in enumerate(zip(*row), start=1)
                if position >= 0
            ]
            for row in zip(found.ids.tolist(), found.distances.tolist(), matches)
        ]

    # ------------------------------------------------------------------------------------ calibration
    def calibrate(
        self,
        embeddings: Tensor,
        labels: Sequence[Any],
        is_query: Sequence[bool] | np.ndarray | None = None,
        is_gallery: Sequence[bool] | np.ndarray | None = None,
        sequences: Sequence[Any] | None = None,
        *,
        target: str = "precision",
        value: float | None = None,
        top_n: int = 5,
    ) -> Calibration:
        """Calibrate the match threshold on a labelled validation split and keep it (:attr:`calibration`).

        The queries are searched among the split's gallery items through a new, empty index of this index's
        knn backend, as oml's retrieval does (:func:`~oml_core.retrieval.knn_backends.search_with_index`): a
        query never retrieves itself nor an item of its sequence, and neither is its ground truth. The
        threshold is then chosen by :func:`~oml_core.index.calibration.calibrate_rr` (formulas and targets:
        :mod:`oml_core.index.calibration`).

        Args:
            embeddings: ``[n, dim]`` embeddings of the split's items.
            labels: Their labels.
            is_query: Which items are queries (None: all).
            is_gallery: Which items are gallery items (None: all; "1 vs rest" when both are None).
            sequences: Their sequence ids (None: no sequences).
            target: ``precision``, ``f1`` or ``fmr``.
            value: The target's value (None: the target's default, a precision of 0.9, an FMR of 0.01).
            top_n: Items retrieved per query; the FMR counts the irrelevant ones among them.

        Raises:
            ValueError: inputs of other lengths; see :func:`~oml_core.index.calibration.calibrate_threshold`.
            CalibrationError: no query or no gallery item; the target cannot be reached.
        """
        embeddings = torch.as_tensor(embeddings).detach().float().cpu()
        n = len(embeddings)
        queries, gallery = _flags(is_query, n, "is_query"), _flags(is_gallery, n, "is_gallery")
        if len(labels) != n or (sequences is not None and len(sequences) != n):
            raise ValueError(f"labels and sequences must have one entry per embedding ({n})")
        if not queries.any() or not gallery.any():
            raise CalibrationError(
                f"cannot calibrate: the split has {int(queries.sum())} queries and {int(gallery.sum())} gallery items"
            )
        found = search_with_index(
            make_knn_index(self._backend_spec, self.distance, self.registry),
            embeddings,
            torch.nonzero(queries).reshape(-1),
            torch.nonzero(gallery).reshape(-1),
            top_n,
            labels_gt=factorize(np.asarray(labels)),
            sequence_ids=None if sequences is None else factorize(np.asarray(sequences)),
        )
        rr = RetrievalResults(found.distances, found.retrieved_ids, found.gt_ids, n_gallery=found.n_gallery)
        self.calibration = calibrate_rr(rr, target=target, value=value)
        return self.calibration

    # ---------------------------------------------------------------------------------- save and load
    def save(self, folder: str | Path) -> Path:
        """Write the index into the new folder ``folder`` (see :mod:`oml_core.index.storage` for its files): its
        config, items, embeddings, the knn backend's own save, and the calibration with its curve as a PNG.

        The index is self-contained (:mod:`oml_core.index.integrity`): an extractor spec's weights are copied
        (the state dict of the extractor as it is, ``weights.pt``, with its sha256 in ``index.json``), and with
        any extractor the probe picture and its embedding are kept, as is the model JSON of what defines the
        embeddings. A loaded index is checked against its probe before it is saved again (and keeps it).

        Everything is written into a temporary folder beside it, which is renamed to ``folder`` when complete:
        ``folder`` appears whole or not at all.

        Raises:
            FileExistsError: ``folder`` exists and is not an empty folder (it is never written over).
            GalleryIndexError: see :attr:`extractor` and :meth:`embed` (the extractor of a spec is built here).
        """
        from oml_core import __version__
        from oml_core.index.plot import plot_calibration

        folder = Path(folder)
        embeddings = self.embeddings
        has_extractor = self._extractor_spec is not None or self._extractor is not None
        if has_extractor:
            self._check_probe()
        with new_folder(folder) as temporary:
            weights_sha256 = None
            if self._extractor_spec is not None:
                weights_sha256 = write_weights(temporary / WEIGHTS_FILE, self.extractor.state_dict())
            probe = None if self._probe is None else self._probe[1]
            if probe is not None or has_extractor:
                write_probe_image(temporary / PROBE_FILE)
            if probe is None and has_extractor:
                probe = self._infer([str(temporary / PROBE_FILE)], None)[0]
            write_json(
                temporary / INDEX_FILE,
                {
                    "format": INDEX_FORMAT,
                    "version": INDEX_VERSION,
                    "oml_core": __version__,
                    "config": self.config,
                    "n_items": len(self),
                    "dim": int(embeddings.shape[1]),
                    "weights_sha256": weights_sha256,
                },
            )
            write_json(
                temporary / ITEMS_FILE, {"ids": self._ids, "paths": self._paths, "labels": self._labels}
            )
            model = model_json(self._extractor_spec, self._transforms_spec, self.distance, weights_sha256)
            write_embeddings(temporary / EMBEDDINGS_FILE, StoredEmbeddings(embeddings, model, probe))
            self._backend.save(temporary / BACKEND_FOLDER)
            if self.calibration is not None:
                write_json(temporary / CALIBRATION_FILE, self.calibration.to_dict())
                plot_calibration(self.calibration, temporary / CALIBRATION_PLOT)
        return folder

    @classmethod
    def load(
        cls,
        folder: str | Path,
        *,
        registry: Registry | None = None,
        extractor: nn.Module | None = None,
        transforms: Callable[[Any], Any] | None = None,
    ) -> GalleryIndex:
        """The index saved by :meth:`save` in ``folder``. Its extractor and transforms are built from the saved
        config when first needed, with the weights saved in the folder (or the objects given here are used
        instead); the knn backend's state is read by the ``load`` of the backend registered under the saved name.
        The folder may have moved: nothing outside it is read but the images to search.

        Checked (:mod:`oml_core.index.integrity`): at load, the model JSON of ``index.json``'s config against
        the one its embeddings were built with (an edited extractor, transforms or distance is refused, naming
        the key); when the extractor is built, the sha256 of ``weights.pt``; before the first image is embedded,
        the embedding of the probe picture by the extractor and transforms in use.

        Raises:
            GalleryIndexError: ``folder`` is not a folder, or a file of it is missing, foreign, corrupt or
                inconsistent with the others (the message names the file); an index of an older version
                (rebuild it).
            RegistryError: the saved knn backend is not registered (e.g. its plugin is not installed).
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise GalleryIndexError(f"{folder}: no such gallery index folder")
        meta_path = folder / INDEX_FILE
        meta = read_json(meta_path)
        if not isinstance(meta, dict) or meta.get("format") != INDEX_FORMAT:
            found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise GalleryIndexError(f"{meta_path}: not an oml gallery index (format {found!r})")
        if meta.get("version") == 1:
            raise GalleryIndexError(
                f"{meta_path}: an index of version 1, which keeps only the path of its weights, so its model cannot "
                f"be checked; this oml reads version {INDEX_VERSION}: rebuild the index (oml index build)"
            )
        if meta.get("version") != INDEX_VERSION:
            raise GalleryIndexError(
                f"{meta_path}: an index of version {meta.get('version')!r}; this oml reads version {INDEX_VERSION}"
            )
        weights_sha256 = meta.get("weights_sha256")
        if weights_sha256 is not None and not _is_sha256(weights_sha256):
            raise GalleryIndexError(f"{meta_path}: weights_sha256 must be null or a sha256 hex digest")
        try:
            config, n_items, dim = meta["config"], int(meta["n_items"]), int(meta["dim"])
            index = cls(
                extractor=extractor if extractor is not None else config["extractor"],
                transforms=transforms if transforms is not None else config["transforms"],
                knn_backend=config["knn_backend"],
                distance=config["distance"],
                registry=registry,
                seed=config["seed"],
                batch_size=config["batch_size"],
                num_workers=config["num_workers"],
            )
        except RegistryError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise GalleryIndexError(
                f"{meta_path}: not a valid gallery index config ({type(e).__name__}: {e})"
            ) from e
        index._restore_items(folder / ITEMS_FILE, n_items)
        stored = read_embeddings(folder / EMBEDDINGS_FILE, n_items, dim)
        saved_model = model_json(
            config["extractor"], config["transforms"], config["distance"], weights_sha256
        )
        check_model(stored.model, saved_model, meta_path, folder / EMBEDDINGS_FILE)
        index._chunks = [stored.embeddings] if n_items else []
        if weights_sha256 is not None:
            index._weights = (_existing(folder / WEIGHTS_FILE, "the index's weights"), weights_sha256)
        if stored.probe is not None:
            index._probe = (_existing(folder / PROBE_FILE, "the index's probe picture"), stored.probe)
        index._backend = _load_backend(folder / BACKEND_FOLDER, index, n_items)
        calibration_path = folder / CALIBRATION_FILE
        if calibration_path.exists():
            try:
                index.calibration = Calibration.from_dict(read_json(calibration_path))
            except (KeyError, TypeError, ValueError) as e:
                raise GalleryIndexError(
                    f"{calibration_path}: not a valid calibration ({type(e).__name__}: {e})"
                ) from e
        return index

    def _restore_items(self, path: Path, n_items: int) -> None:
        items = read_json(path)
        try:
            ids, paths, labels = items["ids"], items["paths"], items["labels"]
            if not all(isinstance(x, list) and len(x) == n_items for x in (ids, paths, labels)):
                raise ValueError(f"ids, paths and labels must be lists of the index's {n_items} items")
            self._ids, self._paths, self._labels = (
                self._new_ids(ids, n_items),
                paths,
                _labels(labels, n_items),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise GalleryIndexError(f"{path}: not valid gallery items ({type(e).__name__}: {e})") from e


# ------------------------------------------------------------------------------------------------ helpers
def check_calibration_args(calibration: Mapping[str, Any]) -> None:
    """Check the keyword arguments of :meth:`GalleryIndex.calibrate` given as ``calibration`` (``target``,
    ``value``, ``top_n``), so that a bad one fails before any image is embedded.

    Raises:
        ValueError: another key, an unknown target, a value out of its range, a ``top_n`` that is not a
            positive integer.
    """
    unknown = set(calibration) - CALIBRATE_ARGS
    if unknown:
        raise ValueError(f"the arguments are {sorted(CALIBRATE_ARGS)}, got also {sorted(unknown)}")
    check_target(calibration.get("target", "precision"), calibration.get("value"))
    top_n = calibration.get("top_n", 1)
    if not _is_int(top_n) or top_n < 1:
        raise ValueError(f"top_n must be a positive integer, got {top_n!r}")


def _spec_or_object(value: Any, kind: str) -> tuple[dict[str, Any] | None, Any]:
    """``(spec, None)`` for a name or a ``{name, args}`` mapping (a plain copy, checked to be JSON values),
    else ``(None, value)``."""
    value = to_plain(value)
    if isinstance(value, str):
        return {"name": value, "args": {}}, None
    if not isinstance(value, Mapping):
        return None, value
    if not isinstance(value.get("name"), str) or not set(value) <= {"name", "args"}:
        raise ValueError(
            f"the {kind} spec must be a mapping {{name: ..., args: {{...}}}}, got {dict(value)!r}"
        )
    spec = {"name": value["name"], "args": dict(value.get("args") or {})}
    try:
        json.dumps(spec, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"the {kind} spec must hold JSON values only (it is saved with the index): {e}"
        ) from e
    return spec, None


def _with_absolute_weights(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with a relative ``args.weights`` made absolute when it names an existing file."""
    weights = spec["args"].get("weights")
    if isinstance(weights, str) and Path(weights).is_file() and not Path(weights).is_absolute():
        return {**spec, "args": {**spec["args"], "weights": str(Path(weights).absolute())}}
    return spec


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _existing(path: Path, what: str) -> Path:
    """``path``, checked to be a file."""
    if not path.is_file():
        raise GalleryIndexError(f"{path}: no such file ({what}); the index folder is incomplete")
    return path


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _labels(values: Sequence[Any], n: int) -> list[int | None]:
    """``n`` labels as ints, None (or NaN) for unknown ones."""
    values = list(values)
    if len(values) != n:
        raise ValueError(f"labels must have one entry per item ({n}), got {len(values)}")
    labels: list[int | None] = []
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            labels.append(None)
        elif _is_int(value) or (isinstance(value, float | np.floating) and float(value).is_integer()):
            labels.append(int(value))
        else:
            raise ValueError(f"labels must be integers (or None), got {value!r}")
    return labels


def _flags(values: Sequence[bool] | np.ndarray | None, n: int, name: str) -> Tensor:
    if values is None:
        return torch.ones(n, dtype=torch.bool)
    flags = torch.as_tensor(np.asarray(values, dtype=bool)).reshape(-1)
    if len(flags) != n:
        raise ValueError(f"{name} must have one entry per embedding ({n}), got {len(flags)}")
    return flags


def _load_backend(folder: Path, index: GalleryIndex, n_items: int) -> IKnnIndex:
    """The backend state saved in ``folder``, read by the ``load`` of the class the registry builds under the
    saved name (the factory itself when it is an ``IKnnIndex`` class, else the class of what it builds)."""
    spec = index.config["knn_backend"]
    factory = index.registry.get("knn_backend", spec["name"]).load()
    backend_class = (
        factory
        if inspect.isclass(factory) and issubclass(factory, IKnnIndex)
        else type(index.registry.build("knn_backend", spec))
    )
    try:
        backend = backend_class.load(folder)
    except Exception as e:  # the backend's own error of a missing or corrupt state, whatever its type
        raise GalleryIndexError(
            f"{folder}: the knn backend {spec['name']!r} cannot load it ({type(e).__name__}: {e})"
        ) from e
    if not isinstance(backend, IKnnIndex) or len(backend) != n_items or backend.distance != index.distance:
        raise GalleryIndexError(
            f"{folder}: the knn backend {spec['name']!r} holds {len(backend)} items by {backend.distance!r} "
            f"distance; the index has {n_items} by {index.distance!r}"
        )
    return backend


__all__ = [
    "CALIBRATE_ARGS",
    "GALLERY_ROWS",
    "GalleryIndex",
    "SearchHit",
    "check_calibration_args",
]
