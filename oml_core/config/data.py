"""How a pipeline gets its data: the dataset component of its config key ``dataset`` (the kind ``dataset``;
null: ``images``), built with the data keys the pipeline offers, asked for the datasets the pipeline needs, and
its checks run before any model does. The pipelines know no modality beyond this."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from oml_core.config.components import build_component, spec_of
from oml_core.datasets.items import first_item_problem
from oml_core.interfaces.datasets import IBaseDataset, IDatasetComponent
from oml_core.registry import ConfigError, Registry
from oml_core.registry.entry import Entry
from oml_core.registry.errors import InterfaceError

#: The dataset component of a config whose ``dataset`` is absent or null (OML's configs).
DEFAULT_DATASET = "images"
#: The config keys a pipeline offers its dataset component as they are (where the pipeline has them).
DATA_KEYS = frozenset(
    {
        "dataset_root",
        "dataframe_name",
        "dataframe_encoding",
        "cache_size",
        "num_workers",
        "data_dir",
        "check_images",
        "show_dataset_warnings",
    }
)
#: The keys of transforms (``transforms_train`` ...), offered built.
TRANSFORMS_PREFIX = "transforms_"
#: What each kind of dataset is asked with: the component's method.
DATASET_METHODS = {
    "train": "train_dataset",
    "validation": "validation_dataset",
    "prediction": "prediction_dataset",
}


def build_dataset_component(
    registry: Registry, config: Mapping[str, Any], pipeline: str
) -> IDatasetComponent:
    """The dataset component of the config key ``dataset`` (absent or None: :data:`DEFAULT_DATASET`).

    ``config`` maps the pipeline's keys to their values. The factory gets, for every parameter it names that its
    ``args`` do not set, the config's value of the key of that name among :data:`DATA_KEYS` (``dataset_root``,
    ``dataframe_name`` ...), the built transforms of a ``transforms_*`` key (None when the key is null: the
    component's default; a callable as it is: already built), and ``pipeline`` (for messages).

    Raises:
        RegistryError: an unknown dataset name or argument.
        ConfigError: the factory refuses its arguments (naming ``pipeline``, the key and the cause).
    """
    spec = spec_of(config.get("dataset") or DEFAULT_DATASET)

    def value(key: str) -> Callable[[], Any]:
        return lambda: config[key]

    def transforms(key: str) -> Callable[[], Any]:
        return lambda: (
            config[key]
            if config[key] is None or callable(config[key])  # null, or already built (a gallery index's)
            else build_component(registry, "transforms", config[key], key, pipeline)
        )

    offers: dict[str, Callable[[], Any]] = {"pipeline": lambda: pipeline}
    for key in config:
        if key in DATA_KEYS:
            offers[key] = value(key)
        elif key.startswith(TRANSFORMS_PREFIX):
            offers[key] = transforms(key)
    return build_component(registry, "dataset", spec, "dataset", pipeline, offers=offers)


def dataset_of(data: IDatasetComponent, which: str, pipeline: str) -> IBaseDataset:
    """``data``'s ``which`` dataset (a key of :data:`DATASET_METHODS`).

    Raises:
        ConfigError: the component gives no such dataset (its method is not implemented), naming it.
    """
    try:
        return getattr(data, DATASET_METHODS[which])()
    except NotImplementedError as e:
        raise ConfigError(
            f"{pipeline}: config key 'dataset': {e}; this pipeline needs its {which} dataset"
        ) from e


def dataset_entry(registry: Registry, spec: Any) -> Entry:
    """The registry entry of the dataset component of the config value ``spec`` of ``dataset`` (None:
    :data:`DEFAULT_DATASET`): what names the component and its plugin in messages.

    Raises:
        RegistryError: an unknown name.
    """
    return registry.get("dataset", spec_of(spec or DEFAULT_DATASET)["name"])


def check_datasets(
    data: IDatasetComponent,
    datasets: list[IBaseDataset],
    num_workers: int,
    progress_bar: bool | None,
    entry: Entry,
) -> None:
    """Run ``data``'s checks of ``datasets`` (:meth:`IDatasetComponent.check`) and issue its warnings as
    ``UserWarning``, then check the first item of each dataset
    (:func:`~oml_core.datasets.items.first_item_problem`).

    Args:
        entry: The registry entry of ``data`` (:func:`dataset_entry`), named with its plugin in messages.

    Raises:
        ConfigError: a bad item (the component's check).
        InterfaceError: an item that is not what the pipelines take, naming the component, its plugin, the dataset
            and what is wrong.
    """
    for message in data.check(datasets, num_workers, progress_bar):
        warnings.warn(message, stacklevel=3)
    for dataset in datasets:
        problem = first_item_problem(dataset)
        if problem is not None:
            raise InterfaceError(
                f"the dataset component {entry.name!r} of the plugin {entry.plugin.provider}: item 0 of its "
                f"{type(dataset).__name__} {problem}"
            )


__all__ = [
    "DATASET_METHODS",
    "DATA_KEYS",
    "DEFAULT_DATASET",
    "TRANSFORMS_PREFIX",
    "build_dataset_component",
    "check_datasets",
    "dataset_entry",
    "dataset_of",
]
