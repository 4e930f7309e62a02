"""``build_gallery_index``: the gallery index of a config (``oml index build``; default config
``oml_core/configs/index_build.yaml``; schema :class:`~oml_core.config.schemas.IndexBuildConfig`),
of the items of its dataset component (``dataset``; null: images), written to a new folder."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from oml_core.config.components import spec_of
from oml_core.config.data import DEFAULT_DATASET
from oml_core.config.schemas import IndexBuildConfig
from oml_core.config.typed import check_component_arguments, validate_config
from oml_core.engine import one_device
from oml_core.index.calibration import CalibrationError
from oml_core.index.embeddings_io import add_embeddings_file, write_index_embeddings
from oml_core.index.errors import GalleryIndexError
from oml_core.index.gallery import GalleryIndex, check_calibration_args
from oml_core.io import EmbeddingsFileError, EmbeddingsMismatchError, check_writable, format_of
from oml_core.io.shards import read_shards_manifest
from oml_core.registry import ConfigError, Registry, default_registry
from oml_core.utils.text import one_line

if TYPE_CHECKING:
    import torch

#: The name of the config's schema (:data:`~oml_core.config.schemas.SCHEMAS`), which is also
#: that of its default config.
INDEX_BUILD = IndexBuildConfig.pipeline

#: What the one line of a calibration that cannot be made suggests (the keys of ``index_build.yaml``).
CALIBRATION_HINT = (
    "calibration.target=f1 or a lower calibration.value changes the target; calibration=null builds the index "
    "without a match threshold"
)


@dataclass
class IndexBuildResult:
    """What ``build_gallery_index`` produced.

    Attributes:
        index: The index.
        index_dir: The folder it was saved to.
        source: What its items are (the dataset component's source: the dataframe file, or the folder of images).
        not_calibrated: Why it was not calibrated (None when it was).
        embeddings_out: The embeddings file of the gallery written beside (``embeddings_out``; None: none).
    """

    index: GalleryIndex
    index_dir: Path
    source: Path
    not_calibrated: str | None
    embeddings_out: Path | None = None


def build_gallery_index(
    cfg: Mapping[str, Any] | IndexBuildConfig | Any, registry: Registry | None = None
) -> IndexBuildResult:
    """Build the gallery index of ``cfg`` and save it to its new ``index_dir``.

    The config (a dict, a ``DictConfig`` or its schema's object, ``IndexBuildConfig``) enters once, at the door: checked
    and converted into its typed config (:func:`~oml_core.config.typed.validate_config`), which is
    all that is read after; then ``calibration`` and its components' arguments are checked.

    Each key of the config is documented on its field of :class:`~oml_core.config.schemas.IndexBuildConfig` (all of
    them: ``docs/config.md``, ``oml index build --help``). The dataset component (``dataset``; images by default) is
    offered the data keys as the pipelines offer them; ``calibration`` gives the arguments of
    :meth:`GalleryIndex.calibrate`, used when the component has a validation split. The index records the
    component's spec and the data keys its factory takes, so that ``oml search`` builds it again for the queries.

    With ``embeddings``, the gallery is the items and vectors of that embeddings file, not embedded again: its
    provenance must be the config's extractor (spec and weights) and transforms
    (:func:`~oml_core.index.embeddings_io.add_embeddings_file`), and the index is not calibrated. With
    ``embeddings_out``, the gallery is also written to that new embeddings file (format ``predictions_format``)
    after the index is saved.

    ``index_dir`` (and ``embeddings_out``) is checked to be free before any item is read: an index never
    overwrites a folder. The extractor
    embeds on the one device of ``accelerator`` and ``devices`` (:func:`~oml_core.engine.one_device`, checked
    before anything is read or written); the index saved is the same whatever the device (see :class:`GalleryIndex`).

    Raises:
        ConfigError: an unknown or missing key, a bad value, more than one device, a GPU this machine does not
            have, an ``index_dir`` that exists and is not empty, bad data, an item that cannot be read, an
            extractor that cannot be built, a calibration target that cannot be reached, a bad ``embeddings`` file or
            one of another model, an ``embeddings_out`` that exists or does not end with its format's suffix (one
            line naming the key, file or target).
        RegistryError: an unknown component name.
    """
    config = cast(IndexBuildConfig, validate_config(cfg, INDEX_BUILD))
    _check_calibration(config.calibration)
    device = one_device(config.accelerator, config.devices, INDEX_BUILD)
    registry = registry or default_registry()
    check_component_arguments(config, registry)
    index_dir = _index_dir(config)
    embeddings_out = _check_embeddings_keys(config)
    try:
        index = index_of_config(config, registry, device)
        if config.embeddings is None:
            not_calibrated = index.add_dataset(rows=config.gallery_rows, calibration=config.calibration)
        else:
            add_embeddings_file(index, Path(config.embeddings).expanduser())
            not_calibrated = (
                f"the gallery came from embeddings={config.embeddings}, which holds no validation split"
            )
    except ConfigError:
        raise
    except (EmbeddingsFileError, EmbeddingsMismatchError) as e:
        raise ConfigError(f"embeddings: {one_line(e)}") from e
    except CalibrationError as e:
        raise ConfigError(f"calibration: {one_line(e)} ({CALIBRATION_HINT})") from e
    except (GalleryIndexError, ValueError) as e:  # a bad value, dataframe or item, named in the message
        raise ConfigError(one_line(e)) from e
    if config.calibration is None:
        not_calibrated = "calibration is null"
    index.save(index_dir)
    if embeddings_out is not None:
        try:
            write_index_embeddings(index, embeddings_out)
        except EmbeddingsFileError as e:  # a file that appeared since the check; the index is saved
            raise ConfigError(f"embeddings_out: {one_line(e)} (the index is saved in {index_dir})") from e
    source = Path(index.data.source) if config.embeddings is None else Path(config.embeddings).expanduser()
    return IndexBuildResult(index, index_dir, source, not_calibrated, embeddings_out)


def index_of_config(
    config: IndexBuildConfig, registry: Registry, device: torch.device | None
) -> GalleryIndex:
    """The new, empty gallery index of ``config`` (its extractor, transforms, knn backend, distance, dataset
    component with the data keys its factory takes, seed, batch size and workers), embedding on ``device``;
    nothing is built or read yet (``oml embed`` of the oml-ray plugin embeds with it too)."""
    return GalleryIndex(
        extractor=config.extractor,
        transforms=config.transforms,
        knn_backend=config.knn_backend,
        distance=config.distance,
        dataset=config.dataset,
        data=_data_keys(config, registry),
        registry=registry,
        seed=config.seed,
        batch_size=config.bs,
        num_workers=config.num_workers,
        device=device,
    )


def _check_embeddings_keys(config: IndexBuildConfig) -> Path | None:
    """Check ``embeddings`` (an existing file of a known format, or a folder of shards with its manifest) and
    ``embeddings_out`` (a new file whose suffix
    is that of ``predictions_format``, which can be written) before any work.

    Returns:
        ``embeddings_out`` as a path (None: none).

    Raises:
        ConfigError: ``embeddings: <the problem>`` or ``embeddings_out: <the problem>``.
    """
    if config.embeddings is not None:
        path = Path(config.embeddings).expanduser()
        if path.is_dir():
            try:
                read_shards_manifest(path)
            except EmbeddingsFileError as e:
                raise ConfigError(f"embeddings: {e}") from e
            return _embeddings_out(config)
        try:
            format_of(path)
        except EmbeddingsFileError as e:
            raise ConfigError(f"embeddings: {e}") from e
        if not path.is_file():
            raise ConfigError(f"embeddings: {path}: no such embeddings file")
    return _embeddings_out(config)


def _embeddings_out(config: IndexBuildConfig) -> Path | None:
    if config.embeddings_out is None:
        return None
    try:
        return check_writable(Path(config.embeddings_out).expanduser().resolve(), config.predictions_format)
    except EmbeddingsFileError as e:
        raise ConfigError(f"embeddings_out: {e}") from e


def _check_calibration(calibration: Mapping[str, Any] | None) -> None:
    """Check ``calibration`` (null, or the arguments of :meth:`GalleryIndex.calibrate`: the index's own rules,
    :func:`~oml_core.index.gallery.check_calibration_args`) before any item is read.

    Raises:
        ConfigError: ``calibration: <the problem>``.
    """
    if calibration is None:
        return
    try:
        check_calibration_args(calibration)
    except ValueError as e:
        raise ConfigError(f"calibration: {e}") from e


def _data_keys(config: IndexBuildConfig, registry: Registry) -> dict[str, Any]:
    """The data keys of ``config`` that the factory of its dataset component takes (and its ``args`` do not set):
    ``dataset_root`` and ``data_dir`` absolute (so that ``oml search`` may run elsewhere), ``dataframe_name``
    null with ``data_dir`` (a folder replaces the dataframe)."""
    values = {
        "dataset_root": _absolute(config.dataset_root),
        "data_dir": _absolute(config.data_dir),
        "dataframe_name": None if config.data_dir is not None else config.dataframe_name,
        "check_images": config.check_images,
        "num_workers": config.num_workers,
    }
    spec = spec_of(config.dataset or DEFAULT_DATASET)
    return registry.offered("dataset", spec, {key: _offer(value) for key, value in values.items()})


def _absolute(folder: str | None) -> str | None:
    return None if folder is None else str(Path(folder).expanduser().resolve())


def _offer(value: Any) -> Callable[[], Any]:
    return lambda: value


def _index_dir(config: IndexBuildConfig) -> Path:
    """``index_dir`` when it is free (missing or an empty folder), or a new ``logs_root/<date>_<time>_index``."""
    if config.index_dir is not None:
        folder = Path(config.index_dir).expanduser().resolve()
        if folder.exists() and not (folder.is_dir() and not any(folder.iterdir())):
            raise ConfigError(
                f"index_dir {str(folder)!r} exists and is not an empty folder; an index is never "
                f"written over it: choose a new index_dir"
            )
        return folder
    base = Path(config.logs_root).expanduser().resolve() / f"{dt.datetime.now():%Y-%m-%d_%H-%M-%S}_index"
    folder, n = base, 0
    while folder.exists():
        n += 1
        folder = base.with_name(f"{base.name}_{n}")
    return folder


__all__ = ["INDEX_BUILD", "IndexBuildResult", "build_gallery_index", "index_of_config"]
