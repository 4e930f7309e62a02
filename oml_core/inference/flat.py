"""Inference of an extractor on "flat" data: a dataset, a list of image paths, or a dataframe in OML's format.

OML's ``oml.inference.flat`` (``inference_on_images``, ``inference_on_dataframe``) and ``oml.inference``
(``inference``)::

    from oml_core.inference import inference_on_dataframe, inference_on_images

    features = inference_on_images(extractor, paths, transform, batch_size=64)
    emb_train, emb_val, df_train, df_val = inference_on_dataframe("mock_dataset", "df.csv", extractor, transform)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from oml_core.caches.embeddings import cached_embeddings, embeddings_cache_key
from oml_core.datasets.dataframe_format import PATHS_COLUMN, SPLIT_COLUMN, parse_bboxes, read_dataframe
from oml_core.datasets.images import ImageBaseDataset, TImReader
from oml_core.inference.batches import TStep, batched_inference, check_batch_size


def _features_step(model: nn.Module, key: str) -> TStep:
    """The step of :func:`batched_inference` that returns ``model(batch[key])``, one row per item."""

    def step(batch: Any, device: torch.device) -> Tensor:
        if not isinstance(batch, Mapping) or key not in batch:
            found = sorted(batch) if isinstance(batch, Mapping) else type(batch).__name__
            raise KeyError(f"the dataset's batches have no {key!r} (its input_tensors_key); found {found}")
        inputs = batch[key]
        if isinstance(inputs, Mapping):  # named tensors of one batch (a text's input_ids and attention_mask)
            inputs = {name: tensor.to(device) for name, tensor in inputs.items()}
            n_items = len(next(iter(inputs.values())))
        else:
            inputs = inputs.to(device)
            n_items = len(inputs)
        out = model(inputs)
        if out.ndim == 0 or out.shape[0] != n_items:
            raise ValueError(
                f"{type(model).__name__} must return one row of features per item, got the shape "
                f"{tuple(out.shape)} for a batch of {n_items} items"
            )
        return out

    return step


def inference(
    model: nn.Module,
    dataset: Dataset,
    batch_size: int,
    num_workers: int = 0,
    verbose: bool = False,
    use_fp16: bool = False,
    accumulate_on_cpu: bool = True,
) -> Tensor:
    """The features ``model(batch[dataset.input_tensors_key])`` of every item of ``dataset``, in dataset order.

    The batches are loaded in order and the model runs in eval mode under ``torch.no_grad()`` (its train/eval
    mode is restored afterwards); see :func:`~oml_core.inference.batches.batched_inference`.

    Args:
        model: The extractor: ``[B, ...]`` inputs to ``[B, feat_dim]`` features.
        dataset: An oml dataset (:class:`~oml_core.interfaces.datasets.IBaseDataset`): its items are dicts
            holding the model's inputs under its attribute ``input_tensors_key``.
        batch_size: Number of items per batch.
        num_workers: Number of workers of the ``DataLoader``.
        verbose: Set ``True`` to see a progress bar.
        use_fp16: Run the model under ``torch.autocast`` to float16 when it is on a CUDA device; no effect on
            any other device.
        accumulate_on_cpu: Gather the features on the CPU (else on the model's device).

    Returns:
        ``[len(dataset), feat_dim]`` float32 features (row ``i``: item ``i``); ``[0, 0]`` for an empty dataset.

    Raises:
        ValueError: ``batch_size`` is not an int >= 1, or the model does not return one row per item.
        TypeError: ``dataset`` has no ``input_tensors_key`` attribute.
        KeyError: the dataset's batches are not dicts holding ``input_tensors_key``.
    """
    key = getattr(dataset, "input_tensors_key", None)
    if not isinstance(key, str):
        raise TypeError(
            f"dataset must be an oml dataset with an input_tensors_key attribute (the key of the model's "
            f"inputs in its items, e.g. an ImageBaseDataset), got {type(dataset).__name__}"
        )
    outputs = batched_inference(
        model,
        dataset,
        _features_step(model, key),
        batch_size=batch_size,
        num_workers=num_workers,
        verbose=verbose,
        use_fp16=use_fp16,
        accumulate_on_cpu=accumulate_on_cpu,
    )
    return torch.cat(outputs) if outputs else torch.zeros(0, 0)


def inference_on_images(
    model: nn.Module,
    paths: Sequence[Path | str],
    transform: Callable[[Any], Any] | None,
    num_workers: int = 0,
    batch_size: int = 128,
    verbose: bool = False,
    f_imread: TImReader | None = None,
    use_fp16: bool = False,
    accumulate_on_cpu: bool = True,
) -> Tensor:
    """The features that ``model`` gives to the images ``paths``, in the order of ``paths``.

    The images are read by an :class:`~oml_core.datasets.images.ImageBaseDataset` (``f_imread``, then
    ``transform``) and passed through :func:`inference`.

    Args:
        model: The extractor.
        paths: Paths to the images.
        transform: Applied to every image read (``None``: only normalised and made a tensor).
        num_workers: Number of workers of the ``DataLoader``.
        batch_size: Number of images per batch.
        verbose: Set ``True`` to see a progress bar.
        f_imread: Reads an image from its path (``None``: :func:`~oml_core.utils.images.imread_pil`).
        use_fp16: ``torch.autocast`` to float16 when the model is on a CUDA device (see :func:`inference`).
        accumulate_on_cpu: Gather the features on the CPU (else on the model's device).

    Returns:
        ``[len(paths), feat_dim]`` float32 features.

    Raises:
        ValueError: ``batch_size`` is not an int >= 1, or the model does not return one row per image.
        FileNotFoundError, OSError: an image cannot be read (the message names it).
    """
    dataset = ImageBaseDataset(paths, transform=transform, f_imread=f_imread)
    return inference(
        model,
        dataset,
        batch_size=batch_size,
        num_workers=num_workers,
        verbose=verbose,
        use_fp16=use_fp16,
        accumulate_on_cpu=accumulate_on_cpu,
    )


def _read_dataframe(dataset_root: Path, dataframe_name: str) -> pd.DataFrame:
    """The checked dataframe, its ``path`` column made absolute (joined to ``dataset_root``)."""
    df = read_dataframe(dataset_root, dataframe_name)
    root = dataset_root.absolute()
    return df.assign(**{PATHS_COLUMN: [str(root / str(path)) for path in df[PATHS_COLUMN]]})


def inference_on_dataframe(
    dataset_root: Path | str,
    dataframe_name: str,
    extractor: nn.Module,
    transforms: Callable[[Any], Any] | None,
    output_cache_path: Path | str | None = None,
    num_workers: int = 0,
    batch_size: int = 128,
    use_fp16: bool = False,
    verbose: bool = False,
) -> tuple[Tensor, Tensor, pd.DataFrame, pd.DataFrame]:
    """The embeddings of every row of the dataframe ``dataset_root / dataframe_name`` (OML's format), split into
    the ``split == "train"`` rows and the others.

    The dataframe is checked first (columns, splits, flags, boxes, existing images). Every row's image
    (``path`` joined to ``dataset_root``, cropped by its bounding box when the dataframe has the columns
    ``x_1, x_2, y_1, y_2``) goes through ``transforms`` and ``extractor`` (:func:`inference`).

    With ``output_cache_path``, an existing cache there is read back instead of running the extractor, when it
    was written for the same key (:func:`~oml_core.caches.embeddings.embeddings_cache_key`: the dataframe file's
    path and bytes, the extractor's class and weights, ``repr(transforms)``); otherwise (no file, or a cache
    written for another key: with a warning naming the file) the embeddings are computed and written there
    atomically (a temporary file in the same folder, flushed to disk, renamed into place). A file there that is
    not an oml embeddings cache (a checkpoint, a text file, a damaged cache) is never overwritten: it is an
    error, raised before the extractor runs.

    Args:
        dataset_root: The dataset's root folder; the ``path`` column is relative to it.
        dataframe_name: The dataframe's file name in ``dataset_root``.
        extractor: The model that computes the embeddings.
        transforms: Applied to every image (``None``: only normalised and made a tensor).
        output_cache_path: The cache file of the embeddings, or ``None`` for no cache.
        num_workers: Number of workers of the ``DataLoader``.
        batch_size: Number of images per batch.
        use_fp16: ``torch.autocast`` to float16 when the extractor is on a CUDA device (see :func:`inference`).
        verbose: Set ``True`` to see a progress bar.

    Returns:
        ``(emb_train, emb_val, df_train, df_val)``: the float32 CPU embeddings of the train rows and of the other
        rows (in the dataframe's order), and those rows (index reset, ``path`` absolute: ready for
        ``PairwiseImagesPostprocessor``).

    Raises:
        ValueError: ``batch_size`` is not an int >= 1.
        oml_core.registry.ConfigError: the dataframe does not exist or is not in OML's format (the message
            names the file, the column and the rows at fault).
        oml_core.caches.embeddings.NotAnEmbeddingsCacheError: (a ``FileExistsError``) ``output_cache_path`` holds
            something that is not an oml embeddings cache (the message names it); it is left untouched.
        FileNotFoundError, OSError: an image cannot be read, or the cache file cannot be written.
    """
    check_batch_size(batch_size)
    dataset_root = Path(dataset_root)
    df = _read_dataframe(dataset_root, dataframe_name)

    def compute() -> Tensor:
        dataset = ImageBaseDataset(df[PATHS_COLUMN], bboxes=parse_bboxes(df), transform=transforms)
        return inference(
            extractor, dataset, batch_size, num_workers=num_workers, verbose=verbose, use_fp16=use_fp16
        )

    if output_cache_path is None:
        embeddings = compute()
    else:
        key = embeddings_cache_key(dataset_root / dataframe_name, extractor, transforms)
        embeddings = cached_embeddings(Path(output_cache_path), key, len(df), compute)
    return _split(df, embeddings)


def _split(df: pd.DataFrame, embeddings: Tensor) -> tuple[Tensor, Tensor, pd.DataFrame, pd.DataFrame]:
    """``(emb_train, emb_val, df_train, df_val)``: the ``split == "train"`` rows and the others."""
    is_train = (df[SPLIT_COLUMN] == "train").to_numpy()
    mask = torch.tensor(is_train, dtype=torch.bool)
    df_train = df[is_train].reset_index(drop=True)
    df_val = df[~is_train].reset_index(drop=True)
    return embeddings[mask], embeddings[~mask], df_train, df_val


__all__ = ["inference", "inference_on_dataframe", "inference_on_images"]
