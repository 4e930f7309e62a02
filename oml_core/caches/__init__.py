"""oml's caches, in one place: what is computed or downloaded once and kept for the next run.

- :mod:`~oml_core.caches.folder`: the user cache folder (``$OML_CACHE_DIR``) and the zoo's weights folder in it;
- :mod:`~oml_core.caches.embeddings`: files of embeddings stored with the key of everything they were computed
  from (the embeddings of ``inference_on_dataframe``, OML's ``inference_cached`` and the post-processing
  pipelines), never read for another key;
- :mod:`~oml_core.caches.digests`: the md5 and sha256 of a file, remembered beside it while it is unchanged.

Who fills them stays where it belongs: the zoo's downloads in :mod:`oml_core.zoo.store` (its checkpoints are kept
in :func:`~oml_core.caches.folder.weights_cache_dir`), OML's ``inference_cached`` in :mod:`oml_core.inference`,
the post-processing pipelines' extraction in ``lightning/pipelines/shared/embeddings_cache.py``.

Nothing is imported here: :mod:`oml_core.const` reads the folder without importing torch.
"""
