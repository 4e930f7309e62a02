"""What the pipelines share: the config schema and its checks (:mod:`.schema`, :mod:`.preflight`), building
components and run directories (:mod:`.common`), the training loaders and scheduler (:mod:`.training`),
inference and its cache (:mod:`.inference`, :mod:`.embeddings_cache`) and the pairwise post-processor's parts
(:mod:`.postprocessing`). The pipelines themselves are the modules of :mod:`oml_core.lightning.pipelines`; their
end-of-run reports are :mod:`oml_core.reports.pipelines`, which only the command line prints."""
