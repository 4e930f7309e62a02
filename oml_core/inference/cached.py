"""``inference_cached``: :func:`~oml_core.inference.flat.inference` whose outputs are kept in a cache file (OML's
``oml.inference.inference_cached``)."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor, nn
from torch.utils.data import Dataset

from oml_core.caches.embeddings import cached_embeddings, dataset_cache_key
from oml_core.inference.flat import inference
from oml_core.utils.logs import get_logger

logger = get_logger(__name__)


def inference_cached(
    model: nn.Module,
    dataset: Dataset,
    batch_size: int,
    num_workers: int = 0,
    use_fp16: bool = False,
    verbose: bool = True,
    accumulate_on_cpu: bool = True,
    cache_path: str | Path = "inference_cache.pth",
) -> Tensor:
    """The outputs of ``model`` over ``dataset`` (:func:`~oml_core.inference.flat.inference`), read from
    ``cache_path`` when it holds them, else computed and written there.

    Unlike OML's, which reads whatever the file holds, the cache file is written with the key of what the
    outputs depend on (:func:`~oml_core.caches.embeddings.dataset_cache_key`: the model's weights, the dataset's
    class, length, dataframe, root and transforms): a file written for another model or dataset is computed
    again and replaced, with a warning, never read as these outputs. See
    :func:`~oml_core.caches.embeddings.cached_embeddings` for the file's format and safety.

    Args:
        model: The extractor: ``[B, ...]`` inputs to ``[B, feat_dim]`` features.
        dataset: An oml dataset (its items hold the model's inputs under ``dataset.input_tensors_key``).
        batch_size: Number of items per batch.
        num_workers: Number of workers of the ``DataLoader``.
        use_fp16: Run the model under ``torch.autocast`` to float16 when it is on a CUDA device.
        verbose: Set ``True`` to see a progress bar.
        accumulate_on_cpu: Gather the features on the CPU (else on the model's device).
        cache_path: The cache file.

    Returns:
        ``[len(dataset), feat_dim]`` features (row ``i``: item ``i``); on the CPU when read from the cache.

    Raises:
        ~oml_core.caches.embeddings.NotAnEmbeddingsCacheError: ``cache_path`` holds something that is not an
            oml embeddings cache (it is left untouched), before anything is computed.
    """
    path = Path(cache_path)
    key = dataset_cache_key(dataset, model)  # type: ignore[arg-type]  # oml datasets have __len__

    def compute() -> Tensor:
        logger.info("Computing the model outputs and saving them to %s", path)
        return inference(
            model,
            dataset,
            batch_size=batch_size,
            num_workers=num_workers,
            verbose=verbose,
            use_fp16=use_fp16,
            accumulate_on_cpu=accumulate_on_cpu,
        )

    return cached_embeddings(path, key, len(dataset), compute)  # type: ignore[arg-type]


__all__ = ["inference_cached"]
